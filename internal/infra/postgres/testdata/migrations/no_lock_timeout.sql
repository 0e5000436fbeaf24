-- +goose Up
-- Violates "lock_timeout on every DDL": the ALTER would queue every request
-- behind it for as long as a long transaction holds orders.
ALTER TABLE orders ADD COLUMN note text;
-- +goose Down
ALTER TABLE orders DROP COLUMN note;
