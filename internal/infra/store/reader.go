package store

import (
	"context"
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
)

// Read implements app.Reader on the primary alone: read runs once, on the
// pool, with the request's token check auth in front of its first
// statement. current is not consulted: the primary's answer is final.
func (r *Runner) Read(ctx context.Context, auth *app.AuthCheck, read func(ctx context.Context, repos app.Repositories) error, _ func() bool) error {
	return read(ctx, r.WithoutTx(auth))
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
//     the fence fails the read (postgres.ErrReplicaBehind).
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
	replica *postgres.Pool
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
func NewReplicaReader(primary *Runner, replica *postgres.Pool, log *slog.Logger, reg prometheus.Registerer) *ReplicaReader {
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
func (r *ReplicaReader) Read(ctx context.Context, auth *app.AuthCheck, read func(ctx context.Context, repos app.Repositories) error, current func() bool) error {
	if r.replica == nil {
		return r.primary.Read(ctx, auth, read, current)
	}
	fence, err := r.primary.tx.Pool().WALFence(ctx, auth)
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
	return read(ctx, r.primary.WithoutTx(auth))
}

// readReplica runs read on one replica connection behind the fence and
// says how it went. Its connection carries no token check: the fence's
// round trip settled it on the primary.
func (r *ReplicaReader) readReplica(ctx context.Context, fence int64, read func(ctx context.Context, repos app.Repositories) error, current func() bool) (string, error) {
	conn, release, err := r.replica.AcquireFenced(ctx, fence)
	if err != nil {
		return replicaFailed, err
	}
	defer release()
	err = read(ctx, r.primary.bind(conn))
	switch {
	case err == nil && (current == nil || current()):
		return replicaAnswered, nil
	case err == nil:
		return replicaOlderThanSeen, nil
	case errors.Is(err, postgres.ErrReplicaBehind):
		return replicaBehind, err
	case domain.ErrorCode(err) != "":
		return replicaNotFound, err
	}
	return replicaFailed, err
}

// CheckReplica says whether the replica answers and is one, for a warning
// at start; reads never depend on it.
func (r *ReplicaReader) CheckReplica(ctx context.Context) error {
	return r.replica.CheckReplica(ctx)
}
