-- name: ProductInsert :one
INSERT INTO products (id, sku, name, price_cents)
VALUES (@id, @sku, @name, @price_cents)
RETURNING *;

-- name: ProductGet :one
SELECT * FROM products WHERE id = @id;

-- name: ProductList :many
-- Keyset pagination, newest first: ids are UUIDv7, so id order is creation order.
SELECT * FROM products
WHERE id < @before
ORDER BY id DESC
LIMIT @row_limit;

-- name: ProductUpdate :one
-- Optimistic concurrency (EXT.CONCURRENCY.VERSION.001): the write applies only
-- to the version the caller saw. No row means a missing product or a stale
-- version. The version is the catalogue's alone: stock lives in stock_levels,
-- so sales never advance it.
-- Patterns and rule ids: docs/patterns.md.
UPDATE products
SET name        = COALESCE(sqlc.narg('name'), name),
    price_cents = COALESCE(sqlc.narg('price_cents'), price_cents),
    version     = version + 1,
    updated_at  = now()
WHERE id = @id AND version = @version
RETURNING *;
