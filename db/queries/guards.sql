-- name: GuardsSet :exec
-- The guard timeouts of one transaction (seed: "Set guards"), and its plan
-- cache mode. is_local = true: they last until the transaction ends, so
-- they never leak to the next client of a server connection that a
-- transaction pooler (PgBouncer, pool_mode = transaction) shares. Sent with
-- the transaction's first round trip, in front of its first statement.
-- FAST PATH (docs/fast-path.md #14): force_generic_plan makes every later
-- statement of the transaction run its prepared statement's one generic
-- plan. Under the default (auto) PostgreSQL kept planning StockLockRows,
-- StockAddDeltas and the keyset pages afresh at every execution, since a
-- custom plan for the actual array or bound looks cheaper than the generic
-- one; their generic plans are the same index scans
-- (TestEveryQueryUsesAnIndex plans every query in its generic form).
SELECT set_config('statement_timeout', @statement_timeout::text, true),
       set_config('lock_timeout', @lock_timeout::text, true),
       set_config('idle_in_transaction_session_timeout', @idle_in_tx_timeout::text, true),
       set_config('plan_cache_mode', 'force_generic_plan', true);

-- name: SessionsByApplication :many
-- The other sessions on this database by application_name: `api migrate up`
-- refuses a contract migration while any of them announces an older schema
-- (postgres.OlderSessions).
SELECT coalesce(application_name, '')::text AS application_name, count(*)::bigint AS sessions
FROM pg_catalog.pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
GROUP BY application_name;
