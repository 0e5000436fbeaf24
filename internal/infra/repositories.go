package infra

import (
	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

// repositories binds the repositories (app.Repositories) to one transaction,
// or to the pool: every repository of a use case runs its sqlc queries on
// the same pipe. Each repository has the file of its table's queries:
// db/queries/products.sql → products_repo.go, and so on; placement.go
// batches the statements of a placement across actors, stock and orders
// (placement_stepwise.go is the same statements one call at a time).
type repositories struct {
	db   dbtx
	q    *dbsqlc.Queries
	keys KeyConfig
}

var _ app.Repositories = (*repositories)(nil)

func (s *repositories) Products() app.ProductRepo     { return productRepo{s} }
func (s *repositories) Stock() app.StockRepo          { return stockRepo{s} }
func (s *repositories) Orders() app.OrderRepo         { return orderRepo{s} }
func (s *repositories) Actors() app.ActorRepo         { return actorRepo{s} }
func (s *repositories) Placement() app.PlacementStore { return placementRepo{s} }
func (s *repositories) Keys() app.KeyStore {
	if s.keys.Store != nil {
		return s.keys.Store
	}
	return keyStore{s}
}
func (s *repositories) Outbox() app.OutboxRepo { return outboxRepo{s} }

// Conn is the transaction (or pool) the repositories run on. Tests use it to
// put a deliberately naive repository in the same transaction.
func (s *repositories) Conn() dbsqlc.DBTX { return s.db }

// maxUUID is the cursor of a first page: every id sorts before it.
var maxUUID = uuid.Max

func before(p app.Page) uuid.UUID {
	if p.Before == uuid.Nil {
		return maxUUID
	}
	return p.Before
}
