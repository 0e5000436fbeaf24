-- name: GuardsSet :exec
-- The guard timeouts of one transaction (seed: "Set guards"). is_local =
-- true: they last until the transaction ends, so they never leak to the
-- next client of a server connection that a transaction pooler
-- (PgBouncer, pool_mode = transaction) shares. Sent with the transaction's
-- first round trip, in front of its first statement.
SELECT set_config('statement_timeout', @statement_timeout::text, true),
       set_config('lock_timeout', @lock_timeout::text, true),
       set_config('idle_in_transaction_session_timeout', @idle_in_tx_timeout::text, true);

-- name: SessionsByApplication :many
-- The other sessions on this database by application_name: `api migrate up`
-- refuses a contract migration while any of them announces an older schema
-- (postgres.OlderSessions).
SELECT coalesce(application_name, '')::text AS application_name, count(*)::bigint AS sessions
FROM pg_catalog.pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
GROUP BY application_name;
