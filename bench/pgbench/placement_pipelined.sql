-- The pipelined ceiling: one order placement with the statements the
-- service's placement sends today (internal/infra: the key claim of
-- idempotency_repo.go, then placement.go's two batches; statement text from
-- db/queries/*.sql, in the order TestRoundTripsOfAPlacement pins), all in one
-- \startpipeline … \endpipeline: pgbench sends them without waiting and
-- reads the answers once, so an order costs one round trip. It is the
-- physical limit of the service's design on this machine: what the same
-- statements cost PostgreSQL with no Go, no HTTP and no round trip between
-- them. placement.sql, which sends each statement on its own, is the second
-- reference.
--
-- A pipeline cannot read a result before it ends (no \gset), so every value
-- is known before the first statement, as the service knows its ids in Go:
-- the order id is bench_uuidv7_at(:k), a UUIDv7 made of the transaction's
-- start time and the key's random number (the same value in every statement
-- of the transaction). The guards are the service's defaults
-- (DB_STATEMENT_TIMEOUT, DB_LOCK_TIMEOUT, DB_IDLE_IN_TX_TIMEOUT; the claim
-- waits up to IDEMPOTENCY_WAIT) and, as the service's GuardsSet, the plan
-- cache mode force_generic_plan (fast-path.md #14); the token check reads
-- the client's token, which load.Seed gives every pgbench customer. Zero-row outcomes (a key
-- already claimed, a credit limit passed) do not stop the pipeline: the
-- benchmark's customers never reach them, and the invariants after the run
-- (one order per key, stock conservation, balances) would show it if they
-- did.
--
-- spread: 1 to 3 distinct products out of 10,000, 1 to 3 units each; one
-- customer per client (as the load generator's workers). Unlike
-- placement.sql, the total counts only the n lines ordered.
\set n random(1, 3)
\set p1 random(1, 3333)
\set p2 3333 + random(1, 3333)
\set p3 6666 + random(1, 3334)
\set q1 random(1, 3)
\set q2 random(1, 3)
\set q3 random(1, 3)
\set d1 -1 * :q1
\set d2 -1 * :q2
\set d3 -1 * :q3
\set total 500 * (:q1 + CASE WHEN :n >= 2 THEN :q2 ELSE 0 END + CASE WHEN :n >= 3 THEN :q3 ELSE 0 END)
\set cust 900000 + :client_id
\set k random(1, 9000000000000000000)
\startpipeline
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT set_config('statement_timeout', '10000'::text, true),
       set_config('lock_timeout', '2000'::text, true),
       set_config('idle_in_transaction_session_timeout', '30000'::text, true),
       set_config('plan_cache_mode', 'force_generic_plan', true);
SELECT set_config('lock_timeout', '5000'::text, true);
INSERT INTO idempotency_keys (actor_id, operation, key, fingerprint, state, expires_at)
VALUES (bench_pid(:cust), 'placeOrder', 'pgb-' || :k, sha256(('pgb-' || :k)::bytea), 'in_progress',
        now() + make_interval(secs => 86400::float8))
ON CONFLICT (actor_id, operation, key) DO NOTHING;
SELECT set_config('lock_timeout', '2000'::text, true);
SELECT a.id, a.role, a.active
FROM api_tokens t JOIN actors a ON a.id = t.actor_id
WHERE t.token_hash = sha256(('pgbench-token-' || :client_id)::bytea);
SELECT fingerprint, state, response_status, response_headers, response_body,
       expires_at <= now() AS expired
FROM idempotency_keys
WHERE actor_id = bench_pid(:cust) AND operation = 'placeOrder' AND key = 'pgb-' || :k;
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
VALUES (bench_uuidv7_at(:k), bench_pid(:cust), 'placed', :total)
RETURNING *;
INSERT INTO order_lines (order_id, line_no, product_id, quantity, unit_price_cents)
SELECT bench_uuidv7_at(:k),
       unnest((ARRAY[1, 2, 3])[1:(:n)]),
       unnest((ARRAY[bench_pid(:p1), bench_pid(:p2), bench_pid(:p3)])[1:(:n)]),
       unnest((ARRAY[:q1::int, :q2::int, :q3::int])[1:(:n)]),
       unnest((ARRAY[500, 500, 500]::bigint[])[1:(:n)]);
INSERT INTO outbox_events (id, type, aggregate_id, payload)
VALUES (bench_uuidv7(), 'order.placed', bench_uuidv7_at(:k),
        ('{"id":"' || bench_uuidv7_at(:k) || '","customer_id":"' || bench_pid(:cust) || '","status":"placed","lines":[' || rtrim(repeat('{"product_id":"00000000-0000-7000-8000-000000000000","quantity":1,"unit_price_cents":500},', :n), ',') || '],"total_cents":' || :total || ',"paid_cents":0,"created_at":"2026-01-01T00:00:00.000000Z","updated_at":"2026-01-01T00:00:00.000000Z"}')::jsonb);
UPDATE idempotency_keys
SET state            = 'completed',
    response_status  = 201,
    response_headers = ('{"ETag": "\"v1\"", "Location": "/v1/orders/' || bench_uuidv7_at(:k) || '", "Content-Type": "application/json"}')::jsonb,
    response_body    = convert_to('{"id":"' || bench_uuidv7_at(:k) || '","customer_id":"' || bench_pid(:cust) || '","status":"placed","lines":[' || rtrim(repeat('{"product_id":"00000000-0000-7000-8000-000000000000","quantity":1,"unit_price_cents":500},', :n), ',') || '],"total_cents":' || :total || ',"paid_cents":0,"created_at":"2026-01-01T00:00:00.000000Z","updated_at":"2026-01-01T00:00:00.000000Z"}', 'UTF8'),
    expires_at       = clock_timestamp() + make_interval(secs => 86400::float8)
WHERE actor_id = bench_pid(:cust) AND operation = 'placeOrder' AND key = 'pgb-' || :k;
COMMIT;
\endpipeline
