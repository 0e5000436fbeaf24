package infra

import (
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

// guards are the arguments of a pool's GuardsSet, ready to queue in front
// of a transaction's first statement.
type guards struct{ params dbsqlc.GuardsSetParams }

func newGuards(c PoolConfig) *guards {
	return &guards{params: dbsqlc.GuardsSetParams{
		StatementTimeout: ms(c.StatementTimeout), LockTimeout: ms(c.LockTimeout), IdleInTxTimeout: ms(c.IdleInTxTimeout),
	}}
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
