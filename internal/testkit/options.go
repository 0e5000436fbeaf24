package testkit

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
	"github.com/ordersvc/ordersvc/internal/infra/store"
)

// Options adjust an Env.
type Options struct {
	// Wrap replaces the transactor the use cases see, for example with a
	// deliberately naive variant that a race test must catch. The commands
	// keep the runner's key latch (unless NoKeyLatch); a wrapper that is an
	// app.KeyLatch too replaces it, for a naive variant of what happens
	// while a request waits on its key.
	Wrap func(app.Transactor) app.Transactor
	// KeyWait is IDEMPOTENCY_WAIT (default 10s; the service's is 5s).
	KeyWait time.Duration
	// KeyTTL is IDEMPOTENCY_TTL (default 24h).
	KeyTTL time.Duration
	// MaxConns sizes the pool (default 16).
	MaxConns int32
	// LockTimeout is DB_LOCK_TIMEOUT, the pool's lock_timeout (default 10s;
	// the service's is 3s).
	LockTimeout time.Duration
	// NoKeyLatch turns the in-process key latch off: duplicates of a
	// request then meet in the database, on the key's row, as they do when
	// they reach different replicas. For tests of the database claim.
	NoKeyLatch bool
	// DatabaseURL, when set, is used instead of a fresh database.
	DatabaseURL string
	// RequestTimeout is REQUEST_TIMEOUT (default none); only the HTTP
	// part (httpkit.New) reads it.
	RequestTimeout time.Duration
	// ReplicaReads makes the queries read the test server's standby
	// (StandbyOf), which the test then holds for its whole life: Env.Standby.
	ReplicaReads ReplicaReads
	// ReadReplicaURL, with ReplicaWhenCurrent, is the replica to read
	// instead of the standby (a test of a replica that is down).
	ReadReplicaURL string
}

// ReplicaReads says how an Env's queries use a read replica.
type ReplicaReads int

const (
	// NoReplica: every read goes to the primary (READ_DATABASE_URL unset).
	NoReplica ReplicaReads = iota
	// ReplicaWhenCurrent: the service's reader (store.ReplicaReader).
	ReplicaWhenCurrent
	// PlainReplicaReads is the naive variant: every query and every token
	// check reads the replica, whatever its lag.
	PlainReplicaReads
)

// withDefaults fills in the options left zero.
func (o Options) withDefaults() Options {
	// A race test queues many requests on one row or one key, and holds the
	// first until the others have arrived; on a loaded machine that takes
	// seconds. The waits are long enough that none ends for slowness (and
	// below the 15 s statement_timeout); a test of a wait sets its own.
	if o.KeyWait == 0 {
		o.KeyWait = 10 * time.Second
	}
	if o.KeyTTL == 0 {
		o.KeyTTL = 24 * time.Hour
	}
	if o.MaxConns == 0 {
		o.MaxConns = 16
	}
	if o.LockTimeout == 0 {
		o.LockTimeout = 10 * time.Second
	}
	return o
}

// transactor is what the use cases get as their transactor and key latch:
// the runner, through Wrap, with the latch off under NoKeyLatch.
func (o Options) transactor(runner *store.Runner) (app.Transactor, app.KeyLatch) {
	var transactor app.Transactor = runner
	var latch app.KeyLatch = runner
	if o.NoKeyLatch {
		latch = nil
	}
	if o.Wrap != nil {
		transactor = o.Wrap(transactor)
		if l, ok := transactor.(app.KeyLatch); ok && latch != nil {
			latch = l
		}
	}
	return transactor, latch
}

// replicaReader opens a pool on the read replica (ReadReplicaURL, or the
// standby, then taken for t) and returns the reader the queries use: the
// service's ReplicaReader, or under PlainReplicaReads a runner on the
// replica alone, returned as plain too for the token checks.
func (o Options) replicaReader(t testing.TB, url string, runner *store.Runner, log *slog.Logger, reg *prometheus.Registry) (reader app.Reader, standby *Standby, plain *store.Runner) {
	t.Helper()
	replicaURL := o.ReadReplicaURL
	if replicaURL == "" {
		standby = StandbyOf(t)
		standby.acquire(t)
		replicaURL = standby.URL(databaseName(url))
	}
	replica, err := postgres.NewPool(context.Background(), postgres.PoolConfig{
		URL: replicaURL, MaxConns: o.MaxConns,
		StatementTimeout: 15 * time.Second, LockTimeout: o.LockTimeout, IdleInTxTimeout: 30 * time.Second,
		ConnectTimeout: 3 * time.Second,
	})
	if err != nil {
		t.Fatalf("open the replica pool: %v", err)
	}
	t.Cleanup(replica.Close)
	if o.ReplicaReads == PlainReplicaReads {
		plain = store.NewRunner(replica, log, nil, store.RetryPolicy{}, store.KeyConfig{})
		return plain, standby, plain
	}
	return store.NewReplicaReader(runner, replica, log, reg), standby, nil
}

// databaseName is the database a connection string names.
func databaseName(u string) string {
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		return ""
	}
	return cfg.Database
}
