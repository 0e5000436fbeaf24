-- name: WALInsertPosition :one
-- The primary's WAL insert position, in bytes, and the WAL page size: a
-- replica that has replayed up to this position has applied every
-- transaction that committed before it was read, acknowledged or not
-- (synchronous_commit = off acknowledges a commit before its WAL is
-- flushed, so neither the flush nor the write position would do). Read in
-- the primary round trip that carries the request's token check.
SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint AS position,
       current_setting('wal_block_size')::bigint AS page_size;

-- name: ReplicaReplayPosition :one
-- How far a streaming replica has replayed the primary's WAL, in bytes;
-- -1 when the server is not in recovery (not a replica, or promoted). Sent
-- in front of a replica read, as its own statement: under READ COMMITTED the
-- read's snapshot is taken after it, so it holds at least everything
-- replayed up to this position.
SELECT coalesce((pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint, -1)::bigint AS position;
