-- One order placement as the service's transaction runs it on PostgreSQL
-- (internal/app/orders.go PlaceOrder inside app.execute; statement text from
-- internal/infra/dbsqlc), without HTTP, Go or the network exchanges: pgbench
-- sends each statement on its own. REPORT.md lists this script's statements
-- next to the service's, from the server's log_statement=all log. The
-- service runs two more: the token check (authentication) and the read of
-- the key's holder in the claim's batch. Other differences, all small:
-- parameters are computed on the server from pgbench variables (bench_pid,
-- sha256, ARRAY slices) where the service binds ready values; the order and
-- event ids come from bench_uuidv7() on the server where the service makes
-- UUIDv7s in Go; the total, the event payload and the stored response have
-- the service's sizes but not its exact content.
--
-- hot: every client orders the first hot product, or both, one unit each.
\set n random(1, 2)
\set p1 100001
\set p2 100002
\set p3 100003
\set q1 1
\set q2 1
\set q3 1
\set d1 -1 * :q1
\set d2 -1 * :q2
\set d3 -1 * :q3
\set total 500 * (:q1 + :q2 + :q3)
\set cust 900000 + :client_id
\set k random(1, 9000000000000000000)
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT set_config('lock_timeout', '5000'::text, true);
INSERT INTO idempotency_keys (actor_id, operation, key, fingerprint, state, expires_at)
VALUES (bench_pid(:cust), 'placeOrder', 'pgb-' || :k, sha256(('pgb-' || :k)::bytea), 'in_progress',
        now() + make_interval(secs => 86400::float8))
ON CONFLICT (actor_id, operation, key) DO NOTHING;
SELECT set_config('lock_timeout', '2000'::text, true);
SELECT credit_limit_cents, balance_cents, active FROM actors WHERE id = bench_pid(:cust) FOR NO KEY UPDATE;
SELECT s.product_id, p.price_cents, s.stock
FROM stock_levels s
JOIN products p ON p.id = s.product_id
WHERE s.product_id = ANY((ARRAY[bench_pid(:p1), bench_pid(:p2), bench_pid(:p3)])[1:(:n)])
ORDER BY s.product_id
FOR NO KEY UPDATE OF s;
UPDATE actors
SET balance_cents = balance_cents + :total::bigint
WHERE id = bench_pid(:cust) AND balance_cents + :total::bigint <= credit_limit_cents;
UPDATE stock_levels s
SET stock      = s.stock + d.delta,
    version    = s.version + 1,
    updated_at = now()
FROM (SELECT unnest((ARRAY[bench_pid(:p1), bench_pid(:p2), bench_pid(:p3)])[1:(:n)]) AS id,
             unnest((ARRAY[:d1::bigint, :d2::bigint, :d3::bigint])[1:(:n)]) AS delta) AS d
WHERE s.product_id = d.id;
INSERT INTO orders (id, customer_id, status, total_cents)
VALUES (bench_uuidv7(), bench_pid(:cust), 'placed', :total)
RETURNING id AS oid, customer_id, status, total_cents, paid_cents, version, created_at, updated_at
\gset
INSERT INTO order_lines (order_id, line_no, product_id, quantity, unit_price_cents)
SELECT :oid::uuid,
       unnest((ARRAY[1, 2, 3])[1:(:n)]),
       unnest((ARRAY[bench_pid(:p1), bench_pid(:p2), bench_pid(:p3)])[1:(:n)]),
       unnest((ARRAY[:q1::int, :q2::int, :q3::int])[1:(:n)]),
       unnest((ARRAY[500, 500, 500]::bigint[])[1:(:n)]);
INSERT INTO outbox_events (id, type, aggregate_id, payload)
VALUES (bench_uuidv7(), 'order.placed', :oid::uuid,
        ('{"id":"' || :oid || '","customer_id":"' || bench_pid(:cust) || '","status":"placed","lines":[' || rtrim(repeat('{"product_id":"00000000-0000-7000-8000-000000000000","quantity":1,"unit_price_cents":500},', :n), ',') || '],"total_cents":' || :total || ',"paid_cents":0,"created_at":"2026-01-01T00:00:00.000000Z","updated_at":"2026-01-01T00:00:00.000000Z"}')::jsonb);
UPDATE idempotency_keys
SET state            = 'completed',
    response_status  = 201,
    response_headers = ('{"ETag": "\"v1\"", "Location": "/v1/orders/' || :oid || '", "Content-Type": "application/json"}')::jsonb,
    response_body    = convert_to('{"id":"' || :oid || '","customer_id":"' || bench_pid(:cust) || '","status":"placed","lines":[' || rtrim(repeat('{"product_id":"00000000-0000-7000-8000-000000000000","quantity":1,"unit_price_cents":500},', :n), ',') || '],"total_cents":' || :total || ',"paid_cents":0,"created_at":"2026-01-01T00:00:00.000000Z","updated_at":"2026-01-01T00:00:00.000000Z"}', 'UTF8')
WHERE actor_id = bench_pid(:cust) AND operation = 'placeOrder' AND key = 'pgb-' || :k;
COMMIT;
