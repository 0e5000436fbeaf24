-- `api check` (store.Check): one statement per kind of finding, each
-- returning the rows that break its rule, so that each comparison sees one
-- snapshot and no write committing meanwhile can make it report a
-- difference that never was. They read whole tables, by design: an
-- operator's command, never a request path. The balance and stock-level
-- checks live with their tables (ActorBalanceMismatches in actors.sql,
-- StockLevelsMissing in stock.sql).

-- name: CheckBalancesOverLimit :many
-- A customer's maintained outstanding balance never exceeds the credit
-- limit (the placement's guard, ActorChargeBalance).
SELECT id, balance_cents, credit_limit_cents
FROM actors
WHERE balance_cents > credit_limit_cents
ORDER BY id;

-- name: CheckPaidMismatches :many
-- An order's paid_cents is the sum of its payments: each payment is counted
-- once.
SELECT o.id, o.paid_cents, COALESCE(p.paid, 0)::bigint AS payments_cents
FROM orders o
LEFT JOIN (SELECT order_id, sum(amount_cents) AS paid FROM payments GROUP BY order_id) p ON p.order_id = o.id
WHERE o.paid_cents <> COALESCE(p.paid, 0)
ORDER BY o.id;

-- name: CheckTotalMismatches :many
-- An order's total_cents is the sum of its lines at the prices taken at
-- placement (an order without lines sums to 0).
SELECT o.id, o.total_cents, COALESCE(l.total, 0)::bigint AS lines_cents
FROM orders o
LEFT JOIN (SELECT order_id, sum(quantity::bigint * unit_price_cents) AS total FROM order_lines GROUP BY order_id) l
       ON l.order_id = o.id
WHERE o.total_cents <> COALESCE(l.total, 0)
ORDER BY o.id;

-- name: CheckActiveStaff :one
-- At least one active staff actor remains (DeactivateActor's guard).
SELECT count(*) AS active_staff FROM actors WHERE role = 'staff' AND active;

-- name: CheckNegativeStock :many
-- Stock is never negative (the guarded statements, backed by a CHECK
-- constraint that a careless migration could drop).
SELECT s.product_id, p.sku, s.stock
FROM stock_levels s JOIN products p ON p.id = s.product_id
WHERE s.stock < 0
ORDER BY s.product_id;

-- name: CheckOrdersWithoutPlacedEvent :many
-- Every order wrote its order.placed event in its own transaction. A
-- delivered event is deleted OUTBOX_RETENTION after its delivery, which
-- came after the order, so only orders younger than the retention must
-- still have theirs (pending, claimed, delivered or dead).
SELECT o.id, o.created_at
FROM orders o
WHERE o.created_at > now() - make_interval(secs => @retention_seconds::float8)
  AND NOT EXISTS (SELECT 1 FROM outbox_events e WHERE e.type = 'order.placed' AND e.aggregate_id = o.id)
ORDER BY o.id;
