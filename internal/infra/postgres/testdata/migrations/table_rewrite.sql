-- +goose Up
-- Violates "no table rewrite": a type change copies every row of orders
-- under ACCESS EXCLUSIVE.
SET LOCAL lock_timeout = '1s';
ALTER TABLE orders ALTER COLUMN total_cents TYPE numeric(20, 0);
-- +goose Down
ALTER TABLE orders ALTER COLUMN total_cents TYPE bigint;
