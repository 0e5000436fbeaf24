-- `api check` (store.Check): one statement per kind of finding, each named
-- Check<Kind> (the kind in CamelCase: CheckNegativeStock is the kind
-- negative_stock) and returning one text column, the finding's line, for
-- each row that breaks its rule. store.Check finds them by that name in the
-- generated code; nothing else lists them. Each statement sees one
-- snapshot, so no write committing meanwhile can make it report a
-- difference that never was. They read whole tables, by design: an
-- operator's command, never a request path (TestEveryQueryUsesAnIndex lets
-- every Check* statement scan). A statement takes no parameter, or one:
-- the retention, OUTBOX_RETENTION as Go writes it (168h0m0s), which
-- PostgreSQL reads as an interval too (see store.Check).
--
-- Each carries in its comment the corruption that breaks exactly its rule
-- on the database of TestCheckFindsEachCorruption (cmd/api/check_test.go):
-- a staff member; a customer with a credit limit of 2,000 who owes 1,200;
-- one product at 250; the customer's order of 4 (1,000, 300 paid) and
-- order of 2 (500, nothing paid), each with its order.placed event.
-- `-- Corruption:` starts the SQL, run as it is (several statements allowed,
-- each finding its rows by itself, e.g. `WHERE paid_cents > 0` for the
-- order of 4), continued by the comment lines indented under it;
-- `-- Finds:` is a part of the one line `api check` must print then. The
-- test fails for a kind without them.
--
-- Some checks live with their tables (CheckBalance in actors.sql,
-- CheckStock in stock.sql).

-- name: CheckCreditLimit :many
-- A customer's maintained outstanding balance never exceeds the credit
-- limit (the placement's guard, ActorChargeBalance).
-- Corruption: UPDATE actors SET credit_limit_cents = 1000 WHERE role = 'customer';
-- Finds: owes 1200, over their credit limit of 1000
SELECT format('customer %s owes %s, over their credit limit of %s', id, balance_cents, credit_limit_cents) AS line
FROM actors
WHERE balance_cents > credit_limit_cents
ORDER BY id;

-- name: CheckPaid :many
-- An order's paid_cents is the sum of its payments: each payment is counted
-- once.
-- Corruption: INSERT INTO payments (id, order_id, actor_id, amount_cents)
--   SELECT gen_random_uuid(), id, customer_id, 50 FROM orders WHERE paid_cents > 0;
-- Finds: has paid_cents 300 but its payments sum to 350
SELECT format('order %s has paid_cents %s but its payments sum to %s', o.id, o.paid_cents, COALESCE(p.paid, 0)) AS line
FROM orders o
LEFT JOIN (SELECT order_id, sum(amount_cents) AS paid FROM payments GROUP BY order_id) p ON p.order_id = o.id
WHERE o.paid_cents <> COALESCE(p.paid, 0)
ORDER BY o.id;

-- name: CheckTotal :many
-- An order's total_cents is the sum of its lines at the prices taken at
-- placement (an order without lines sums to 0).
-- Corruption: UPDATE order_lines SET quantity = quantity + 1 WHERE order_id IN (SELECT id FROM orders WHERE paid_cents > 0);
-- Finds: has total_cents 1000 but its lines sum to 1250
SELECT format('order %s has total_cents %s but its lines sum to %s', o.id, o.total_cents, COALESCE(l.total, 0)) AS line
FROM orders o
LEFT JOIN (SELECT order_id, sum(quantity::bigint * unit_price_cents) AS total FROM order_lines GROUP BY order_id) l
       ON l.order_id = o.id
WHERE o.total_cents <> COALESCE(l.total, 0)
ORDER BY o.id;

-- name: CheckStaff :many
-- At least one active staff actor remains (DeactivateActor's guard): one
-- line when none does.
-- Corruption: UPDATE actors SET active = false WHERE role = 'staff';
-- Finds: no active staff actor: nobody can manage the catalogue, the stock or the actors
SELECT 'no active staff actor: nobody can manage the catalogue, the stock or the actors (create one with `api actor create --role staff`)'::text AS line
WHERE NOT EXISTS (SELECT 1 FROM actors WHERE role = 'staff' AND active);

-- name: CheckNegativeStock :many
-- Stock is never negative (the guarded statements, backed by a CHECK
-- constraint that a careless migration could drop).
-- Corruption: ALTER TABLE stock_levels DROP CONSTRAINT stock_levels_stock_nonnegative;
--   UPDATE stock_levels SET stock = -2;
-- Finds: has stock -2, below zero
SELECT format('product %s (sku %s) has stock %s, below zero', s.product_id, p.sku, s.stock) AS line
FROM stock_levels s JOIN products p ON p.id = s.product_id
WHERE s.stock < 0
ORDER BY s.product_id;

-- name: CheckOrderEvent :many
-- Every order wrote its order.placed event in its own transaction. A
-- delivered event is deleted OUTBOX_RETENTION after its delivery, which
-- came after the order, so only orders younger than the retention must
-- still have theirs (pending, claimed, delivered or dead). The corruption
-- loses both orders' events and ages the unpaid one past the retention,
-- which is then no finding.
-- Corruption: DELETE FROM outbox_events WHERE type = 'order.placed';
--   UPDATE orders SET created_at = now() - interval '169 hours' WHERE paid_cents = 0;
-- Finds: has no order.placed event, though delivered events are kept 168h0m0s
SELECT format('order %s, placed %s, has no order.placed event, though delivered events are kept %s',
              o.id, to_char(o.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), @retention::text) AS line
FROM orders o
WHERE o.created_at > now() - CAST(@retention::text AS interval)
  AND NOT EXISTS (SELECT 1 FROM outbox_events e WHERE e.type = 'order.placed' AND e.aggregate_id = o.id)
ORDER BY o.id;
