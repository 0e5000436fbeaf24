-- +goose Up
-- Violates "no long ACCESS EXCLUSIVE lock on a hot table": products is
-- locked, then every row is copied while the lock is held (what the first
-- form of 00004 did before dropping products.stock).
SET LOCAL lock_timeout = '1s';
LOCK TABLE products IN ACCESS EXCLUSIVE MODE;
UPDATE products SET updated_at = updated_at;
-- +goose Down
SELECT 1;
