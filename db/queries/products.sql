-- name: ProductInsert :one
INSERT INTO products (id, sku, name, price_cents, stock)
VALUES (@id, @sku, @name, @price_cents, @stock)
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
-- to the version the caller saw. No row means a missing product or a stale version.
UPDATE products
SET name        = COALESCE(sqlc.narg('name'), name),
    price_cents = COALESCE(sqlc.narg('price_cents'), price_cents),
    version     = version + 1,
    updated_at  = now()
WHERE id = @id AND version = @version
RETURNING *;

-- name: ProductAdjustStock :one
-- One guarded atomic statement (pattern 2): adjustments commute, so no version
-- is needed, only the guard that stock stays non-negative. No row means a
-- missing product or not enough stock.
UPDATE products
SET stock      = stock + @delta,
    version    = version + 1,
    updated_at = now()
WHERE id = @id AND stock + @delta >= 0
RETURNING *;

-- name: ProductsLockForUpdate :many
-- Locks the rows in id order (pattern 3), so that two transactions that lock
-- overlapping sets of products always queue instead of deadlocking. FOR NO
-- KEY UPDATE because no key changes: it does not block the KEY SHARE locks
-- of foreign-key checks from order lines.
SELECT id, price_cents, stock
FROM products
WHERE id = ANY(@ids::uuid[])
ORDER BY id
FOR NO KEY UPDATE;

-- name: ProductsAddStock :exec
-- Applies per-product deltas to rows the transaction has already locked.
UPDATE products p
SET stock      = p.stock + d.delta,
    version    = p.version + 1,
    updated_at = now()
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@deltas::bigint[]) AS delta) AS d
WHERE p.id = d.id;

-- name: StockAdjustmentInsert :exec
INSERT INTO stock_adjustments (id, product_id, actor_id, delta, reason, stock_after)
VALUES (@id, @product_id, @actor_id, @delta, @reason, @stock_after);
