package infra

import (
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

// guards are the arguments of a pool's GuardsSet, ready to queue in front
// of a transaction's first statement.
type guards struct {
	params dbsqlc.GuardsSetParams
	// deadline bounds a background transaction from the client's side
	// (backgroundDeadline).
	deadline time.Duration
}

func newGuards(c PoolConfig) *guards {
	d := defaultBackgroundDeadline
	if c.StatementTimeout > 0 {
		d = 2*c.StatementTimeout + time.Second
	}
	return &guards{deadline: d, params: dbsqlc.GuardsSetParams{
		StatementTimeout: ms(c.StatementTimeout), LockTimeout: ms(c.LockTimeout), IdleInTxTimeout: ms(c.IdleInTxTimeout),
	}}
}

// defaultBackgroundDeadline is the background deadline on a pool opened
// without a statement timeout.
const defaultBackgroundDeadline = 30 * time.Second

// backgroundDeadline bounds one transaction of a background worker (a
// sweep's batch) from the client's side. The server's statement_timeout
// ends a slow statement first; the deadline is for when no server answers
// at all: behind PgBouncer while PostgreSQL is down, a statement waits in
// PgBouncer's queue (query_wait_timeout, 120 s) and no server-side timeout
// runs. Twice DB_STATEMENT_TIMEOUT and a second: a batch is two statements
// and its COMMIT.
func backgroundDeadline(pool *pgxpool.Pool) time.Duration {
	if g := poolGuards(pool); g != nil {
		return g.deadline
	}
	return defaultBackgroundDeadline
}

// guardsOf holds the guards of every pool NewPool opened (a few bytes
// each), so that the Runner and the Purger built on a pool
// send its guards without every constructor taking them again.
var guardsOf sync.Map // *pgxpool.Pool → *guards

// poolGuards returns the guards of pool; a pool not opened by NewPool has
// none (nil: nothing is sent, the server's settings apply).
func poolGuards(pool *pgxpool.Pool) *guards {
	g, _ := guardsOf.Load(pool)
	gs, _ := g.(*guards)
	return gs
}
