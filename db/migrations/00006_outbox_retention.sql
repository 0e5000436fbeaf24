-- +goose NO TRANSACTION
-- +goose Up
-- The retention deletion (OUTBOX_RETENTION): delivered events, oldest
-- delivery first. Partial, so it holds only delivered rows, the ones the
-- deletion reads. Built CONCURRENTLY because outbox_events is the table
-- that grew without bound before retention existed: a plain CREATE INDEX
-- would block every placement's event insert for as long as the build takes
-- on a large table; CONCURRENTLY takes only a SHARE UPDATE EXCLUSIVE lock
-- (inserts, updates and deletes go on), at the price of two table scans and
-- of running outside a transaction. If the build fails it leaves an INVALID
-- index: drop it (DROP INDEX CONCURRENTLY outbox_events_delivered_idx) and
-- run the migration again.
CREATE INDEX CONCURRENTLY IF NOT EXISTS outbox_events_delivered_idx
    ON outbox_events (delivered_at) WHERE state = 'delivered';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS outbox_events_delivered_idx;
