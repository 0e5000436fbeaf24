-- +goose Up
-- Follows every rule (the shape of a refunds migration): a column with a
-- constant default (metadata only), a new table whose foreign key locks
-- orders for an instant, all under lock_timeout.
SET LOCAL lock_timeout = '1s';
ALTER TABLE orders ADD COLUMN refunded_cents_example bigint NOT NULL DEFAULT 0;
CREATE TABLE refunds_example (
    id           uuid        PRIMARY KEY,
    order_id     uuid        NOT NULL REFERENCES orders (id),
    amount_cents bigint      NOT NULL CHECK (amount_cents > 0),
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX refunds_example_order_id_idx ON refunds_example (order_id);
-- +goose Down
DROP TABLE refunds_example;
ALTER TABLE orders DROP COLUMN refunded_cents_example;
