-- +goose Up
-- Violates "new columns nullable or with a constant default": the default
-- that made adding the column metadata only is dropped at once, so every
-- insert of the previous binary, which does not name the column, fails
-- (23502). No rewrite: the relfilenode check alone misses it.
SET LOCAL lock_timeout = '1s';
ALTER TABLE orders ADD COLUMN note text NOT NULL DEFAULT '';
ALTER TABLE orders ALTER COLUMN note DROP DEFAULT;
-- +goose Down
ALTER TABLE orders DROP COLUMN note;
