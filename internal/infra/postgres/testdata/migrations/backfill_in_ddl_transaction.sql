-- +goose Up
-- Violates "backfills in bounded batches outside the DDL transaction": the
-- UPDATE writes every row while the ALTER's ACCESS EXCLUSIVE lock is held.
SET LOCAL lock_timeout = '1s';
ALTER TABLE orders ADD COLUMN note text;
UPDATE orders SET note = 'migrated';
-- +goose Down
ALTER TABLE orders DROP COLUMN note;
