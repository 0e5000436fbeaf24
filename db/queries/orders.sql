-- name: OrderInsert :one
-- The creation time comes from the caller, like the id: the pipelined
-- placement renders its answer before this insert goes out with COMMIT.
-- Balance: ActorChargeBalance, first in the placement's write batch (app.PlaceOrder, store.WritePlacement).
INSERT INTO orders (id, customer_id, status, total_cents, created_at, updated_at)
VALUES (@id, @customer_id, 'placed', @total_cents, @created_at, @created_at)
RETURNING *;

-- name: OrderLinesInsert :exec
INSERT INTO order_lines (order_id, line_no, product_id, quantity, unit_price_cents)
SELECT @order_id::uuid,
       unnest(@line_nos::int[]),
       unnest(@product_ids::uuid[]),
       unnest(@quantities::int[]),
       unnest(@unit_prices::bigint[]);

-- name: OrderGet :many
-- An order with its lines, in line order, in one statement: one row per
-- line, the order's columns repeated on each. An order is always written
-- with its lines (OrderInsert and OrderLinesInsert in one transaction; an
-- order has 1 to 50 lines), so no row means no such order.
SELECT sqlc.embed(o), l.product_id, l.quantity, l.unit_price_cents
FROM orders o
JOIN order_lines l ON l.order_id = o.id
WHERE o.id = @id
ORDER BY l.line_no;

-- name: OrderLinesGet :many
SELECT order_id, line_no, product_id, quantity, unit_price_cents
FROM order_lines
WHERE order_id = ANY(@order_ids::uuid[])
ORDER BY order_id, line_no;

-- name: OrderListAll :many
SELECT * FROM orders
WHERE id < @before
ORDER BY id DESC
LIMIT @row_limit;

-- name: OrderListByCustomer :many
SELECT * FROM orders
WHERE customer_id = @customer_id AND id < @before
ORDER BY id DESC
LIMIT @row_limit;

-- name: OrderSetStatus :one
-- Optimistic concurrency driven by If-Match (pattern 4): the transition applies
-- only to the version the caller saw, which the domain already checked.
-- Patterns and rule ids: docs/patterns.md.
-- Balance: ActorReleaseBalance of what was still owed, on cancel (app.CancelOrder); a ship keeps the order owed.
UPDATE orders
SET status     = @status,
    version    = version + 1,
    updated_at = now()
WHERE id = @id AND version = @version
RETURNING *;

-- name: OrderAddPayment :one
-- One guarded atomic increment (pattern 2): the guard, not a prior read,
-- keeps paid_cents within total_cents. No row: missing, cancelled or overpaid.
-- Patterns and rule ids: docs/patterns.md.
-- Balance: ActorReleaseBalance of the amount (app.RecordPayment).
UPDATE orders
SET paid_cents = paid_cents + @amount_cents,
    version    = version + 1,
    updated_at = now()
WHERE id = @id AND status <> 'cancelled'
  AND paid_cents + @amount_cents <= total_cents
RETURNING *;

-- name: PaymentInsert :exec
INSERT INTO payments (id, order_id, actor_id, amount_cents)
VALUES (@id, @order_id, @actor_id, @amount_cents);
