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

-- name: OrderAddRefund :one
-- One guarded atomic increment (pattern 2), like OrderAddPayment: the guard,
-- not a prior read, keeps refunded_cents within paid_cents, backed by the
-- CHECK orders_refund_within_paid. Only a cancelled order is refunded. No
-- row: missing, not cancelled or over-refunded.
-- Patterns and rule ids: docs/patterns.md.
-- Balance: none: only a cancelled order is refunded, and a cancelled order owes nothing (app.RecordRefund).
UPDATE orders
SET refunded_cents = refunded_cents + @amount_cents,
    version        = version + 1,
    updated_at     = now()
WHERE id = @id AND status = 'cancelled'
  AND refunded_cents + @amount_cents <= paid_cents
RETURNING *;

-- name: RefundInsert :exec
INSERT INTO refunds (id, order_id, actor_id, amount_cents, reason)
VALUES (@id, @order_id, @actor_id, @amount_cents, @reason);

-- name: CheckRefundBeyondPaid :many
-- `api check`, kind refund_beyond_paid: every order whose refunded_cents
-- exceeds its paid_cents or that was refunded without being cancelled (the
-- CHECK and the guard keep both from happening; this finds what went
-- around them). The corruption refunds the paid order, still placed, with
-- a refund row to match, so that only this kind fires.
-- Corruption: UPDATE orders SET refunded_cents = 100 WHERE paid_cents > 0;
--   INSERT INTO refunds (id, order_id, actor_id, amount_cents, reason)
--   SELECT gen_random_uuid(), id, (SELECT id FROM actors WHERE role = 'staff'), 100, 'x' FROM orders WHERE paid_cents > 0;
-- Finds: (placed) has refunded_cents 100 but paid_cents 300: only what a cancelled order was paid may be refunded
SELECT format('order %s (%s) has refunded_cents %s but paid_cents %s: only what a cancelled order was paid may be refunded',
              id, status, refunded_cents, paid_cents) AS line
FROM orders
WHERE refunded_cents > 0 AND (refunded_cents > paid_cents OR status <> 'cancelled')
ORDER BY id;

-- name: CheckRefundSum :many
-- `api check`, kind refund_sum: every order whose refunded_cents differs
-- from the sum of its refund rows, in one statement (one snapshot).
-- Corruption: INSERT INTO refunds (id, order_id, actor_id, amount_cents, reason)
--   SELECT gen_random_uuid(), id, (SELECT id FROM actors WHERE role = 'staff'), 50, 'x' FROM orders WHERE paid_cents > 0;
-- Finds: has refunded_cents 0 but its refunds sum to 50 (difference -50)
SELECT format('order %s has refunded_cents %s but its refunds sum to %s (difference %s)',
              o.id, o.refunded_cents, d.refunds, CASE WHEN d.diff >= 0 THEN '+' ELSE '' END || d.diff) AS line
FROM orders o
LEFT JOIN (SELECT order_id, sum(amount_cents) AS sum
           FROM refunds
           GROUP BY order_id) r ON r.order_id = o.id
CROSS JOIN LATERAL (SELECT COALESCE(r.sum, 0)::bigint AS refunds, o.refunded_cents - COALESCE(r.sum, 0)::bigint AS diff) d
WHERE d.diff <> 0
ORDER BY o.id;
