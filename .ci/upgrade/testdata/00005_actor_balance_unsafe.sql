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
-- What this locks, and for how long. The whole migration is one
-- transaction. LOCK TABLE orders IN SHARE MODE waits for every transaction
-- that is writing orders, then keeps orders readable but unwritable until
-- COMMIT, so the sum below sees every order and none changes before the
-- balances are stored. ALTER TABLE takes ACCESS EXCLUSIVE on actors (the
-- column itself is metadata only, its constant default needs no rewrite;
-- the CHECK scans actors once) and DROP INDEX takes ACCESS EXCLUSIVE on
-- orders, both until COMMIT: every request waits, authentication included,
-- because it reads actors. The time is one sequential scan and aggregation
-- of orders plus one update per customer who owes anything: 2.3 s for
-- 300,000 orders of 10,000 customers on a busy 2-core machine, so count
-- seconds per million orders. On a large
-- table, run it in a maintenance window with the service stopped: a
-- request that waits longer than DB_LOCK_TIMEOUT gets a 503, and a binary
-- older than this migration does not move the balance, so it must not
-- serve after it. `api check` afterwards confirms every balance.
LOCK TABLE orders IN SHARE MODE;

ALTER TABLE actors
    ADD COLUMN balance_cents bigint NOT NULL DEFAULT 0,
    ADD CONSTRAINT actors_balance_nonnegative CHECK (balance_cents >= 0);

UPDATE actors a
SET balance_cents = o.owed
FROM (SELECT customer_id, sum(total_cents - paid_cents) AS owed
      FROM orders
      WHERE status IN ('placed', 'shipped')
      GROUP BY customer_id) o
WHERE a.id = o.customer_id AND o.owed <> 0;

-- It served only the sum that placement no longer runs; every order write
-- would keep paying for it.
DROP INDEX orders_customer_outstanding_idx;

-- +goose Down
CREATE INDEX orders_customer_outstanding_idx ON orders (customer_id)
    INCLUDE (total_cents, paid_cents) WHERE status IN ('placed', 'shipped');
ALTER TABLE actors DROP COLUMN balance_cents;
