-- +goose NO TRANSACTION
-- +goose Up
-- Each customer's outstanding balance, kept on the actor row: the sum of
-- total_cents - paid_cents over the customer's placed and shipped orders
-- (the contract's definition), maintained by every write that changes an
-- order's total, paid amount or status, in the same transaction, with a
-- guarded atomic statement. Placement checks balance + total against the
-- credit limit on the row it has locked anyway, so the check no longer
-- grows with the customer's history. `api check` recomputes the sum and
-- reports any balance that differs from it.
--
-- Nothing keeps balance_cents <= credit_limit_cents: lowering a limit below
-- what a customer already owes is allowed and blocks new orders only.
--
-- This is the expand half of an online change (docs/migrations.md, ADR
-- 0017): it runs while the previous release, which does not move the
-- balance, still serves, and it never locks two tables in one transaction.
-- Each statement runs in its own short transaction with lock_timeout 1s
-- (below the service's DB_LOCK_TIMEOUT), so no request queues behind it for
-- longer; `api migrate up` tries again when it runs out. Every statement can
-- run twice. In the application's lock order (customer row, then orders):
--   1. the column, nullable: NULL means "not summed yet" (metadata only);
--   2. a trigger on orders moves the balance for the writes of sessions that
--      announce no schema in application_name (the previous release), so
--      every order placed, paid or cancelled by it is counted;
--   3. the sum, customer by customer, each under the customer's row lock
--      (FOR NO KEY UPDATE, as placement takes it): a placement of the
--      previous release holds that lock until it commits, and a payment's or
--      cancellation's trigger takes it before it commits, so every order
--      write is either in the sum or applied to it afterwards;
--   4. NOT NULL through a validated CHECK, so that no step rewrites or scans
--      actors under an ACCESS EXCLUSIVE lock.
-- The trigger stays until 00008 (contract) drops it, once every binary older
-- than this schema has stopped; the current release moves the balance itself.
--
-- Databases that applied the earlier, single-transaction form of this
-- migration are unaffected: goose does not run an applied migration again,
-- and 00008 finds no trigger to drop.
-- +goose StatementBegin
SELECT set_config('lock_timeout', '1s', true);
ALTER TABLE actors ADD COLUMN IF NOT EXISTS balance_cents bigint;
ALTER TABLE actors ALTER COLUMN balance_cents SET DEFAULT 0;
-- +goose StatementEnd

-- Whether the session announces the schema it was built for (as in 00004;
-- a database that applied the earlier form of 00004 lacks it).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ordersvc_announces_schema() RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT current_setting('application_name') ~ '^ordersvc [a-z-]+ schema=[0-9]+$'
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION actors_balance_from_orders() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    delta bigint := 0;
BEGIN
    IF ordersvc_announces_schema() THEN
        RETURN NULL;
    END IF;
    IF NEW.status IN ('placed', 'shipped') THEN
        delta := NEW.total_cents - NEW.paid_cents;
    END IF;
    IF TG_OP = 'UPDATE' AND OLD.status IN ('placed', 'shipped') THEN
        delta := delta - (OLD.total_cents - OLD.paid_cents);
    END IF;
    IF delta <> 0 THEN
        UPDATE actors SET balance_cents = balance_cents + delta WHERE id = NEW.customer_id;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
SELECT set_config('lock_timeout', '1s', true);
DROP TRIGGER IF EXISTS orders_balance_transition ON orders;
CREATE TRIGGER orders_balance_transition AFTER INSERT OR UPDATE OF status, total_cents, paid_cents ON orders
    FOR EACH ROW EXECUTE FUNCTION actors_balance_from_orders();
-- +goose StatementEnd

-- The sum, 100 customers per transaction, in id order.
-- +goose StatementBegin
DO $$
DECLARE
    after_id uuid := '00000000-0000-0000-0000-000000000000';
    customer uuid;
    n        integer;
BEGIN
    LOOP
        PERFORM set_config('lock_timeout', '1s', true);
        n := 0;
        FOR customer IN
            SELECT id FROM actors WHERE id > after_id AND balance_cents IS NULL ORDER BY id LIMIT 100
        LOOP
            PERFORM 1 FROM actors WHERE id = customer FOR NO KEY UPDATE;
            UPDATE actors
            SET balance_cents = (SELECT coalesce(sum(total_cents - paid_cents), 0)
                                 FROM orders
                                 WHERE customer_id = customer AND status IN ('placed', 'shipped'))
            WHERE id = customer;
            after_id := customer;
            n := n + 1;
        END LOOP;
        COMMIT;
        EXIT WHEN n = 0;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
SELECT set_config('lock_timeout', '1s', true);
ALTER TABLE actors DROP CONSTRAINT IF EXISTS actors_balance_known;
ALTER TABLE actors ADD CONSTRAINT actors_balance_known CHECK (balance_cents IS NOT NULL) NOT VALID;
ALTER TABLE actors DROP CONSTRAINT IF EXISTS actors_balance_nonnegative;
ALTER TABLE actors ADD CONSTRAINT actors_balance_nonnegative CHECK (balance_cents >= 0) NOT VALID;
-- +goose StatementEnd

-- A scan under SHARE UPDATE EXCLUSIVE: reads and writes of actors go on.
-- +goose StatementBegin
SELECT set_config('lock_timeout', '1s', true);
ALTER TABLE actors VALIDATE CONSTRAINT actors_balance_known;
ALTER TABLE actors VALIDATE CONSTRAINT actors_balance_nonnegative;
-- +goose StatementEnd

-- The validated CHECK proves NOT NULL: no scan under the ACCESS EXCLUSIVE lock.
-- +goose StatementBegin
SELECT set_config('lock_timeout', '1s', true);
ALTER TABLE actors ALTER COLUMN balance_cents SET NOT NULL;
ALTER TABLE actors DROP CONSTRAINT actors_balance_known;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER IF EXISTS orders_balance_transition ON orders;
DROP FUNCTION IF EXISTS actors_balance_from_orders();
CREATE INDEX IF NOT EXISTS orders_customer_outstanding_idx ON orders (customer_id)
    INCLUDE (total_cents, paid_cents) WHERE status IN ('placed', 'shipped');
ALTER TABLE actors DROP COLUMN balance_cents;
