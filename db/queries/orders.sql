-- name: OrderInsert :one
INSERT INTO orders (id, customer_id, status, total_cents)
VALUES (@id, @customer_id, 'placed', @total_cents)
RETURNING *;

-- name: OrderLinesInsert :exec
INSERT INTO order_lines (order_id, line_no, product_id, quantity, unit_price_cents)
SELECT @order_id::uuid,
       unnest(@line_nos::int[]),
       unnest(@product_ids::uuid[]),
       unnest(@quantities::int[]),
       unnest(@unit_prices::bigint[]);

-- name: OrderGet :one
SELECT * FROM orders WHERE id = @id;

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
UPDATE orders
SET status     = @status,
    version    = version + 1,
    updated_at = now()
WHERE id = @id AND version = @version
RETURNING *;

-- name: OrderAddPayment :one
-- One guarded atomic increment (pattern 2): the guard, not a prior read,
-- keeps paid_cents within total_cents. No row: missing, cancelled or overpaid.
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
