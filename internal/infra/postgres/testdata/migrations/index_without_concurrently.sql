-- +goose Up
-- Violates "CREATE INDEX CONCURRENTLY on a table that has rows": a plain
-- build holds SHARE on orders, refusing every write, for the whole build.
SET LOCAL lock_timeout = '1s';
CREATE INDEX orders_updated_at_idx ON orders (updated_at);
-- +goose Down
DROP INDEX orders_updated_at_idx;
