-- +goose Up
-- Refunds of cancelled orders: what was paid on an order that is then
-- cancelled becomes refundable, and staff return it in one or more refunds.
-- orders.refunded_cents is the running sum of an order's refunds, kept within
-- paid_cents by the guarded increment (OrderAddRefund) and by the CHECK
-- below; the refunds table keeps each refund, and `api check` compares the
-- two.
--
-- Safe to run while the previous binary serves (expand only):
-- - ADD COLUMN with a constant default is metadata only since PostgreSQL 11:
--   no rewrite, no scan. It takes ACCESS EXCLUSIVE on orders for that
--   instant, so lock_timeout (1 s, below the service's DB_LOCK_TIMEOUT, as
--   docs/migrations.md asks) bounds the wait behind long transactions; when
--   it runs out the migration fails whole and `api migrate up` runs it again.
-- - The CHECK is added NOT VALID: no scan under that exclusive lock, and
--   every row inserted or updated from then on is checked. The rows already
--   there hold the default 0, which satisfies it. Validating it inside this
--   transaction would scan orders while the exclusive lock is still held;
--   `ALTER TABLE orders VALIDATE CONSTRAINT orders_refund_within_paid` may
--   be run at any later time instead (it scans under SHARE UPDATE EXCLUSIVE,
--   reads and writes go on); nothing depends on it.
-- - The event types allowed in outbox_events gain refund.recorded: the old
--   CHECK is dropped and the wider one added NOT VALID, both metadata only
--   (every existing row satisfies the wider list; no scan under the lock).
-- - The refunds table and its index are new: nobody waits on them.
-- The previous binary keeps working: its statements name their columns
-- (sqlc expands *), so it never reads refunded_cents, and its inserts get the
-- default 0. It refuses to cancel a paid order, which is the old rule and
-- leaves every invariant intact.
SET LOCAL lock_timeout = '1s';

ALTER TABLE orders ADD COLUMN refunded_cents bigint NOT NULL DEFAULT 0;

-- "refunded_cents never exceeds paid_cents", enforced by the row itself.
ALTER TABLE orders ADD CONSTRAINT orders_refund_within_paid
    CHECK (refunded_cents >= 0 AND refunded_cents <= paid_cents) NOT VALID;

ALTER TABLE outbox_events DROP CONSTRAINT outbox_events_type_check,
    ADD CONSTRAINT outbox_events_type_check CHECK (type IN ('order.placed', 'order.cancelled', 'order.shipped',
        'payment.recorded', 'refund.recorded', 'stock.adjusted')) NOT VALID;

CREATE TABLE refunds (
    id           uuid        PRIMARY KEY,
    order_id     uuid        NOT NULL REFERENCES orders (id),
    actor_id     uuid        NOT NULL REFERENCES actors (id),
    amount_cents bigint      NOT NULL CHECK (amount_cents > 0),
    reason       text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX refunds_order_id_idx ON refunds (order_id);

-- +goose Down
SET LOCAL lock_timeout = '1s';
DROP TABLE refunds;
ALTER TABLE outbox_events DROP CONSTRAINT outbox_events_type_check,
    ADD CONSTRAINT outbox_events_type_check CHECK (type IN ('order.placed', 'order.cancelled', 'order.shipped',
        'payment.recorded', 'stock.adjusted')) NOT VALID;
ALTER TABLE orders DROP COLUMN refunded_cents;
