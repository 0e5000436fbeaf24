-- name: StockInsert :one
INSERT INTO stock_levels (product_id, stock)
VALUES (@product_id, @stock)
RETURNING *;

-- name: StockGet :one
SELECT * FROM stock_levels WHERE product_id = @product_id;

-- name: StockList :many
-- Keyset pagination, newest product first, like the catalogue: product ids
-- are UUIDv7, so id order is creation order.
SELECT * FROM stock_levels
WHERE product_id < @before
ORDER BY product_id DESC
LIMIT @row_limit;

-- name: StockAdjust :one
-- One guarded atomic statement (pattern 2): adjustments commute, so no
-- version is checked, only the guard that stock stays non-negative. No row
-- means a missing product or not enough stock.
-- Patterns and rule ids: docs/patterns.md.
UPDATE stock_levels
SET stock      = stock + @delta,
    version    = version + 1,
    updated_at = now()
WHERE product_id = @product_id AND stock + @delta >= 0
RETURNING *;

-- name: StockLockRows :many
-- Locks the stock rows in product id order (pattern 3), so that two
-- transactions that lock overlapping sets always queue instead of
-- deadlocking, and reads each product's catalogue price in the same
-- statement. FOR NO KEY UPDATE OF s locks the stock rows only: the product
-- rows are read, not locked, so a price edit neither waits for a placement
-- nor makes one wait; the price taken is the one committed when this
-- statement reads it.
-- Patterns and rule ids: docs/patterns.md.
SELECT s.product_id, p.price_cents, s.stock
FROM stock_levels s
JOIN products p ON p.id = s.product_id
WHERE s.product_id = ANY(@ids::uuid[])
ORDER BY s.product_id
FOR NO KEY UPDATE OF s;

-- name: StockAddDeltas :exec
-- Applies per-product deltas to stock rows the transaction has already
-- locked (StockLockRows). CHECK (stock >= 0) backs the caller's check.
UPDATE stock_levels s
SET stock      = s.stock + d.delta,
    version    = s.version + 1,
    updated_at = now()
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@deltas::bigint[]) AS delta) AS d
WHERE s.product_id = d.id;

-- name: StockAdjustmentInsert :exec
INSERT INTO stock_adjustments (id, product_id, actor_id, delta, reason, stock_after)
VALUES (@id, @product_id, @actor_id, @delta, @reason, @stock_after);

-- name: CheckStock :many
-- `api check`, kind stock: every product without a stock level. Creation
-- writes both in one transaction, so none should exist; such a product
-- could be listed but never sold. It reads every product, by design.
-- Corruption: DELETE FROM stock_levels;
-- Finds: has no stock level: it is listed but can never be sold
SELECT format('product %s (sku %s) has no stock level: it is listed but can never be sold', p.id, p.sku) AS line
FROM products p
WHERE NOT EXISTS (SELECT 1 FROM stock_levels s WHERE s.product_id = p.id)
ORDER BY p.id;
