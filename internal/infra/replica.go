package infra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

// Read implements app.Reader on the primary alone: read runs once, on the
// pool, with the request's token check in front of its first statement.
// current is not consulted: the primary's answer is final.
func (r *Runner) Read(ctx context.Context, read func(ctx context.Context, repos app.Repositories) error, _ func() bool) error {
	return read(ctx, r.WithoutTx())
}

// ReplicaReader implements app.Reader with a streaming replica
// (READ_DATABASE_URL) in front of the primary's Runner. A read proves the
// replica current before it trusts its answer (ADR 0023):
//
//  1. On the primary, in one round trip: the request's token check, if
//     still pending, and the WAL insert position (WALInsertPosition), the
//     fence. Every transaction that committed before the read began, and so
//     every write any caller was told about, ends at or before it.
//  2. On one replica connection, in one round trip: the replica's replay
//     position (ReplicaReplayPosition), then the read's statements, whose
//     snapshots are taken after it. A replica that has not replayed up to
//     the fence fails the read (errReplicaBehind).
//  3. The primary answers instead when the replica is behind, cannot be
//     reached or fails, or its answer is not current for the caller: read
//     returned an error there (not found included) or current said the
//     aggregate is older than the caller's If-None-Match.
//
// Each outcome is counted (ordersvc_replica_reads_total), and a replica that
// fails is logged: a replica that is down costs the primary a read, never
// an answer.
type ReplicaReader struct {
	primary *Runner
	replica *pgxpool.Pool
	log     *slog.Logger
	reads   *prometheus.CounterVec
}

// The outcomes of a replica read, the label values of
// ordersvc_replica_reads_total.
const (
	replicaAnswered      = "replica"         // the replica's answer was current and served
	replicaBehind        = "behind"          // the replica had not replayed the fence: read on the primary
	replicaNotFound      = "not_found"       // the replica found nothing (or refused): read on the primary
	replicaOlderThanSeen = "older_than_seen" // older than the caller's If-None-Match: read on the primary
	replicaFailed        = "failed"          // unreachable or failed: read on the primary
)

// NewReplicaReader returns a reader that tries replica before primary. Its
// metric is registered on reg. With a nil replica (READ_DATABASE_URL unset)
// every read goes to the primary, as Runner.Read, and the metric stays at
// zero: dashboards see the series either way.
func NewReplicaReader(primary *Runner, replica *pgxpool.Pool, log *slog.Logger, reg prometheus.Registerer) *ReplicaReader {
	r := &ReplicaReader{
		primary: primary, replica: replica, log: log,
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ordersvc_replica_reads_total",
			Help: "Query reads tried on the read replica, by outcome: replica (answered there), or read again on the primary because the replica was behind, failed, found nothing, or held an older version than the caller's If-None-Match.",
		}, []string{"outcome"}),
	}
	for _, o := range []string{replicaAnswered, replicaBehind, replicaNotFound, replicaOlderThanSeen, replicaFailed} {
		r.reads.WithLabelValues(o) // present from the start, at zero
	}
	if reg != nil {
		reg.MustRegister(r.reads)
	}
	return r
}

// Read implements app.Reader: on the replica when it proves current, else
// on the primary.
func (r *ReplicaReader) Read(ctx context.Context, read func(ctx context.Context, repos app.Repositories) error, current func() bool) error {
	if r.replica == nil {
		return r.primary.Read(ctx, read, current)
	}
	fence, err := r.fence(ctx)
	if err != nil {
		return err
	}
	outcome, err := r.readReplica(ctx, fence, read, current)
	r.reads.WithLabelValues(outcome).Inc()
	if outcome == replicaAnswered || ctx.Err() != nil {
		return err
	}
	if outcome == replicaFailed {
		r.log.WarnContext(ctx, "read replica failed; reading the primary", "err", err)
	}
	return read(ctx, r.primary.WithoutTx())
}

// fence reads the primary's WAL insert position, with the request's pending
// token check in front (a refused check fails it with
// app.ErrUnauthenticated).
//
// The insert position of a primary whose last record ended exactly at a
// WAL page boundary points past the next page's header, where the next
// record will go; a replica's replay position is the end of the last
// record, the boundary itself. So a position within a page header's length
// of a page start is taken as that page start: no record ends inside a
// page header, so a replica at or past the page start has replayed the
// record that ended there, and a record that crosses into the page and ends
// within the first long header's length of it.
func (r *ReplicaReader) fence(ctx context.Context) (int64, error) {
	row, err := queries.WALInsertPosition(ctx, newPoolPipe(r.primary.pool))
	if err != nil {
		return 0, translate(err)
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

// readReplica runs read on one replica connection behind the fence and
// says how it went. Its statements carry no token check: the fence's round
// trip settled it on the primary.
func (r *ReplicaReader) readReplica(ctx context.Context, fence int64, read func(ctx context.Context, repos app.Repositories) error, current func() bool) (string, error) {
	conn, err := r.replica.Acquire(ctx)
	if err != nil {
		return replicaFailed, fmt.Errorf("acquire a replica connection: %w", err)
	}
	defer conn.Release()
	p := &pipe{db: conn, guards: poolGuards(r.replica), fence: &replicaFence{position: fence}}
	err = read(app.WithoutAuthCheck(ctx), r.primary.bind(p))
	switch {
	case err == nil && (current == nil || current()):
		return replicaAnswered, nil
	case err == nil:
		return replicaOlderThanSeen, nil
	case errors.Is(err, errReplicaBehind):
		return replicaBehind, err
	case domain.ErrorCode(err) != "":
		return replicaNotFound, err
	}
	return replicaFailed, err
}

// replicaFence is the position a replica must have replayed for its answer
// to a read to be current: the primary's WAL insert position when the read
// began.
type replicaFence struct {
	position int64
	sent     bool
}

// errReplicaBehind: the replica has not replayed the fence yet (or is not
// in recovery at all, having been promoted or never been a replica).
var errReplicaBehind = errors.New("read replica has not replayed the primary's position at the start of the read")

// check reads the replica's replay position and fails when it is short of
// the fence.
func (f *replicaFence) check(ctx context.Context, db dbsqlc.DBTX) error {
	replayed, err := queries.ReplicaReplayPosition(ctx, db)
	if err != nil {
		return err
	}
	if replayed < f.position {
		return errReplicaBehind
	}
	return nil
}

// errNotAReplica: READ_DATABASE_URL reaches a server that is not in
// recovery. Its answers are never trusted: it may be the primary itself (no
// harm, but no gain) or a promoted former replica that no longer follows it.
var errNotAReplica = errors.New("the read database is not a streaming replica (not in recovery): every read goes to the primary")

// CheckReplica says whether the replica answers and is one, for a warning
// at start; reads never depend on it.
func (r *ReplicaReader) CheckReplica(ctx context.Context) error {
	replayed, err := queries.ReplicaReplayPosition(ctx, newPoolPipe(r.replica))
	if err != nil {
		return translate(err)
	}
	if replayed < 0 {
		return errNotAReplica
	}
	return nil
}
