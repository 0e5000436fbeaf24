-- name: GuardsSet :exec
-- The guard timeouts of one transaction (seed: "Set guards"). is_local =
-- true: they last until the transaction ends, so they never leak to the
-- next client of a server connection that a transaction pooler
-- (PgBouncer, pool_mode = transaction) shares. Sent with the transaction's
-- first round trip, in front of its first statement.
SELECT set_config('statement_timeout', @statement_timeout::text, true),
       set_config('lock_timeout', @lock_timeout::text, true),
       set_config('idle_in_transaction_session_timeout', @idle_in_tx_timeout::text, true);
