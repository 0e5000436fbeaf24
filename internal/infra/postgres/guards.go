package postgres

import (
	"time"

	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

// FAST PATH (docs/fast-path.md #2): the guards ride with BEGIN.
// FAST PATH (docs/fast-path.md #14): GuardsSet also sets plan_cache_mode
// to force_generic_plan, local to the transaction like the timeouts: every
// later statement runs the generic plan its connection prepared once,
// instead of a custom plan made at each execution.
//
// guards are the arguments of a pool's GuardsSet, ready to queue in front
// of a transaction's first statement.
type guards struct {
	params dbsqlc.GuardsSetParams
	// deadline bounds a background transaction from the client's side
	// (Pool.BackgroundDeadline).
	deadline time.Duration
}

func newGuards(c PoolConfig) *guards {
	d := defaultBackgroundDeadline
	if c.StatementTimeout > 0 {
		d = 2*c.StatementTimeout + time.Second
	}
	return &guards{deadline: d, params: dbsqlc.GuardsSetParams{
		StatementTimeout: Millis(c.StatementTimeout), LockTimeout: Millis(c.LockTimeout), IdleInTxTimeout: Millis(c.IdleInTxTimeout),
	}}
}

// defaultBackgroundDeadline is the background deadline on a pool opened
// without a statement timeout.
const defaultBackgroundDeadline = 30 * time.Second

// BackgroundDeadline bounds one transaction of a background worker (a
// sweep's batch) from the client's side. The server's statement_timeout
// ends a slow statement first; the deadline is for when no server answers
// at all: behind PgBouncer while PostgreSQL is down, a statement waits in
// PgBouncer's queue (query_wait_timeout, 120 s) and no server-side timeout
// runs. Twice DB_STATEMENT_TIMEOUT and a second: a batch is two statements
// and its COMMIT.
func (p *Pool) BackgroundDeadline() time.Duration {
	if p.guards != nil {
		return p.guards.deadline
	}
	return defaultBackgroundDeadline
}
