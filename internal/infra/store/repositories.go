// Package store holds the repositories (app.Repositories): one file per
// table, each repository a thin mapping between the domain and the
// generated sqlc calls, bound to one connection of internal/infra/postgres
// (a transaction or the pool). It also holds the use-case runner (Runner:
// app.Transactor and app.Reader), the placement's batched statements, the
// idempotency key store with its in-process latch, and `api check`'s
// queries. It imports postgres; postgres never imports it (ADR 0024).
package store

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
)

// repositories binds the repositories (app.Repositories) to one transaction,
// or to the pool: every repository of a use case runs its sqlc queries on
// the same pipe. Each repository has the file of its table's queries:
// db/queries/products.sql → products_repo.go, and so on; placement.go
// batches the statements of a placement across actors, stock and orders
// (placement_stepwise.go is the same statements one call at a time).
type repositories struct {
	db   postgres.Conn
	q    *dbsqlc.Queries
	keys KeyConfig
	// recent, when not nil, is the Runner's memory of the keys it claimed
	// (keyStore.Claim reads those ahead of the transaction).
	recent *recentKeys
	// claims, in a transaction, holds a key's claim while it waits to go
	// out with the next statement (claim_later.go); nil outside one.
	claims *claimSlot
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

// wrap translates a repository's error (translate) and names the
// operation it came from ("orders.add_payment: …"), unless it is an outcome
// the domain defines (not found, a version conflict, a refusal with a
// code), which the use cases compare and map as they are. errors.Is and
// errors.As still see through the name.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	err = translate(err)
	if isDomainOutcome(err) {
		return err
	}
	return fmt.Errorf("%s: %w", op, err)
}

// translate is postgres.Translate, which reads what PostgreSQL says, then
// outcomeOfConstraint, which reads what a broken constraint of the schema
// means. Every error of a statement goes through it (wrap); a write's that
// went out at COMMIT comes translated out of postgres.Runner.InTx, and
// Runner.InTx reads its constraint.
func translate(err error) error { return outcomeOfConstraint(postgres.Translate(err)) }

// outcomeOfConstraint replaces a broken constraint that backs a domain rule
// by the rule's outcome. What a table's constraints mean is said in the file
// of its statements (productConstraint in products_repo.go, …; a new
// table's function joins the list below): a unique key
// that is a normal outcome (the SKU), and the guards and CHECKs that are the
// last line of defence behind a guarded statement (pattern 1; patterns and
// rule ids: docs/patterns.md). A constraint that no file names keeps the
// driver's error, a 500: only a missing guard can break it.
func outcomeOfConstraint(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || !strings.HasPrefix(pgErr.Code, sqlIntegrityViolationClass) {
		return err
	}
	for _, meaning := range [...]func(*pgconn.PgError) *domain.Error{
		actorConstraint, productConstraint, stockConstraint, orderConstraint,
	} {
		if de := meaning(pgErr); de != nil {
			return de
		}
	}
	return err
}

// The SQLSTATEs of a broken constraint.
const (
	sqlIntegrityViolationClass = "23"    // 23502 not null, 23505 unique, 23514 check, …
	sqlNotNullViolation        = "23502" // a NULL where NOT NULL holds
)

// isDomainOutcome says whether err is one of the domain's own outcomes (it
// carries a domain code), which a repository returns unwrapped.
func isDomainOutcome(err error) bool { return domain.ErrorCode(err) != "" }
