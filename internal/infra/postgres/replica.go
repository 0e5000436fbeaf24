package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

// A replica read (store.ReplicaReader, ADR 0023) proves the replica
// current before it trusts its answer: the primary's WAL insert position
// (WALFence) is the fence, and the read's connection to the replica sends
// the replica's replay position in front of its first statement
// (AcquireFenced), failing with ErrReplicaBehind when it is short.

// WALFence reads the primary's WAL insert position, with the request's token
// check auth in front while it is pending (a refused check fails it with
// app.ErrUnauthenticated; nil for none).
//
// The insert position of a primary whose last record ended exactly at a
// WAL page boundary points past the next page's header, where the next
// record will go; a replica's replay position is the end of the last
// record, the boundary itself. So a position within a page header's length
// of a page start is taken as that page start: no record ends inside a
// page header, so a replica at or past the page start has replayed the
// record that ended there, and a record that crosses into the page and ends
// within the first long header's length of it.
func (p *Pool) WALFence(ctx context.Context, auth *app.AuthCheck) (int64, error) {
	row, err := queries.WALInsertPosition(ctx, newPoolPipe(p, auth))
	if err != nil {
		return 0, Translate(err)
	}
	pos := row.Position
	if off := pos % row.PageSize; row.PageSize > 0 && off <= walLongPageHeaderSize {
		pos -= off
	}
	return pos, nil
}

// walLongPageHeaderSize is SizeOfXLogLongPHD, the header of a WAL segment's
// first page; other pages have a shorter one (24 bytes).
const walLongPageHeaderSize = 40

// AcquireFenced acquires a connection of p, a replica's pool, that sends
// the replica's replay position in front of its first statement and fails
// it with ErrReplicaBehind when the replica has not replayed fence. It
// carries no token check: a replica may not have a deactivation yet, so
// the caller settles the check on the primary (WALFence) first. release
// gives the connection back.
func (p *Pool) AcquireFenced(ctx context.Context, fence int64) (c Conn, release func(), err error) {
	conn, err := p.Acquire(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("acquire a replica connection: %w", err)
	}
	return &pipe{db: conn, guards: p.guards, fence: &replicaFence{position: fence}}, conn.Release, nil
}

// replicaFence is the position a replica must have replayed for its answer
// to a read to be current: the primary's WAL insert position when the read
// began.
type replicaFence struct {
	position int64
	sent     bool
}

// ErrReplicaBehind: the replica has not replayed the fence yet (or is not
// in recovery at all, having been promoted or never been a replica).
var ErrReplicaBehind = errors.New("read replica has not replayed the primary's position at the start of the read")

// check reads the replica's replay position and fails when it is short of
// the fence.
func (f *replicaFence) check(ctx context.Context, db dbsqlc.DBTX) error {
	replayed, err := queries.ReplicaReplayPosition(ctx, db)
	if err != nil {
		return err
	}
	if replayed < f.position {
		return ErrReplicaBehind
	}
	return nil
}

// ErrNotAReplica: READ_DATABASE_URL reaches a server that is not in
// recovery. Its answers are never trusted: it may be the primary itself (no
// harm, but no gain) or a promoted former replica that no longer follows it.
var ErrNotAReplica = errors.New("the read database is not a streaming replica (not in recovery): every read goes to the primary")

// CheckReplica says whether p's server answers and is a replica, for a
// warning at start; reads never depend on it.
func (p *Pool) CheckReplica(ctx context.Context) error {
	replayed, err := queries.ReplicaReplayPosition(ctx, newPoolPipe(p, nil))
	if err != nil {
		return Translate(err)
	}
	if replayed < 0 {
		return ErrNotAReplica
	}
	return nil
}
