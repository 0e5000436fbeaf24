package infra

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

// store binds the sqlc queries to one transaction, or to the pool.
type store struct {
	db   dbtx
	q    *dbsqlc.Queries
	keys KeyConfig
}

func (s *store) Products() app.ProductRepo { return productRepo{s} }
func (s *store) Stock() app.StockRepo      { return stockRepo{s} }
func (s *store) Orders() app.OrderRepo     { return orderRepo{s} }
func (s *store) Actors() app.ActorRepo     { return actorRepo{s} }
func (s *store) Keys() app.KeyStore {
	if s.keys.Store != nil {
		return s.keys.Store
	}
	return keyStore{s}
}
func (s *store) Outbox() app.OutboxRepo { return outboxRepo{s} }

// Conn is the transaction (or pool) the repositories run on. Tests use it to
// put a deliberately naive repository in the same transaction.
func (s *store) Conn() dbsqlc.DBTX { return s.db }

// maxUUID is the cursor of a first page: every id sorts before it.
var maxUUID = uuid.Max

func before(p app.Page) uuid.UUID {
	if p.Before == uuid.Nil {
		return maxUUID
	}
	return p.Before
}

// ---- products

type productRepo struct{ *store }

func toProduct(r dbsqlc.Product) *domain.Product {
	return domain.RehydrateProduct(r.ID, domain.SKU(r.Sku), r.Name, domain.Cents(r.PriceCents),
		domain.Version(r.Version), r.CreatedAt, r.UpdatedAt)
}

func (r productRepo) Insert(ctx context.Context, p *domain.Product) (*domain.Product, error) {
	row, err := r.q.ProductInsert(ctx, r.db, dbsqlc.ProductInsertParams{
		ID: p.ID(), Sku: string(p.SKU()), Name: p.Name(), PriceCents: int64(p.Price()),
	})
	if err != nil {
		return nil, translate(err)
	}
	return toProduct(row), nil
}

func (r productRepo) Get(ctx context.Context, id uuid.UUID) (*domain.Product, error) {
	row, err := r.q.ProductGet(ctx, r.db, id)
	if err != nil {
		return nil, translate(err)
	}
	return toProduct(row), nil
}

func (r productRepo) List(ctx context.Context, p app.Page) ([]*domain.Product, error) {
	rows, err := r.q.ProductList(ctx, r.db, dbsqlc.ProductListParams{Before: before(p), RowLimit: int32(p.Limit)})
	if err != nil {
		return nil, translate(err)
	}
	out := make([]*domain.Product, len(rows))
	for i, row := range rows {
		out[i] = toProduct(row)
	}
	return out, nil
}

func (r productRepo) Update(ctx context.Context, id uuid.UUID, expected domain.Version, patch domain.ProductPatch) (*domain.Product, error) {
	params := dbsqlc.ProductUpdateParams{ID: id, Version: int64(expected)}
	if patch.Name != nil {
		params.Name = pgtype.Text{String: *patch.Name, Valid: true}
	}
	if patch.Price != nil {
		params.PriceCents = pgtype.Int8{Int64: int64(*patch.Price), Valid: true}
	}
	row, err := r.q.ProductUpdate(ctx, r.db, params)
	if err == nil {
		return toProduct(row), nil
	}
	err = translate(err)
	if err != domain.ErrNotFound {
		return nil, err
	}
	// The guard refused: tell a missing product from a stale version.
	if _, err := r.Get(ctx, id); err != nil {
		return nil, err
	}
	return nil, domain.ErrVersionConflict
}

// ---- stock levels

type stockRepo struct{ *store }

func toStockLevel(r dbsqlc.StockLevel) *domain.StockLevel {
	return domain.RehydrateStockLevel(r.ProductID, r.Stock, domain.Version(r.Version), r.UpdatedAt)
}

func (r stockRepo) Insert(ctx context.Context, s *domain.StockLevel) (*domain.StockLevel, error) {
	row, err := r.q.StockInsert(ctx, r.db, dbsqlc.StockInsertParams{ProductID: s.ProductID(), Stock: s.Stock()})
	if err != nil {
		return nil, translate(err)
	}
	return toStockLevel(row), nil
}

func (r stockRepo) Get(ctx context.Context, productID uuid.UUID) (*domain.StockLevel, error) {
	row, err := r.q.StockGet(ctx, r.db, productID)
	if err != nil {
		return nil, translate(err)
	}
	return toStockLevel(row), nil
}

func (r stockRepo) List(ctx context.Context, p app.Page) ([]*domain.StockLevel, error) {
	rows, err := r.q.StockList(ctx, r.db, dbsqlc.StockListParams{Before: before(p), RowLimit: int32(p.Limit)})
	if err != nil {
		return nil, translate(err)
	}
	out := make([]*domain.StockLevel, len(rows))
	for i, row := range rows {
		out[i] = toStockLevel(row)
	}
	return out, nil
}

func (r stockRepo) Adjust(ctx context.Context, actorID uuid.UUID, adj domain.StockAdjustment) (*domain.StockLevel, error) {
	row, err := r.q.StockAdjust(ctx, r.db, dbsqlc.StockAdjustParams{ProductID: adj.ProductID, Delta: adj.Delta})
	if err != nil {
		err = translate(err)
		if err != domain.ErrNotFound {
			return nil, err
		}
		// The guard refused: tell a missing product from a short stock.
		s, err := r.Get(ctx, adj.ProductID)
		if err != nil {
			return nil, err
		}
		return nil, &domain.InsufficientStockError{ProductID: s.ProductID(), Requested: -adj.Delta, Available: s.Stock()}
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	err = r.q.StockAdjustmentInsert(ctx, r.db, dbsqlc.StockAdjustmentInsertParams{
		ID: id, ProductID: adj.ProductID, ActorID: actorID, Delta: adj.Delta, Reason: adj.Reason, StockAfter: row.Stock,
	})
	if err != nil {
		return nil, translate(err)
	}
	return toStockLevel(row), nil
}

func (r stockRepo) LockRows(ctx context.Context, ids []uuid.UUID) ([]app.StockRow, error) {
	rows, err := r.q.StockLockForUpdate(ctx, r.db, ids)
	if err != nil {
		return nil, translate(err)
	}
	return toStockRows(rows), nil
}

func toStockRows(rows []dbsqlc.StockLockForUpdateRow) []app.StockRow {
	out := make([]app.StockRow, len(rows))
	for i, row := range rows {
		out[i] = app.StockRow{ID: row.ProductID, Price: domain.Cents(row.PriceCents), Stock: row.Stock}
	}
	return out
}

func (r stockRepo) AddStock(ctx context.Context, deltas map[uuid.UUID]int64) error {
	return translate(r.q.StockAddDeltas(ctx, r.db, addStockParams(deltas)))
}

func addStockParams(deltas map[uuid.UUID]int64) dbsqlc.StockAddDeltasParams {
	ids := make([]uuid.UUID, 0, len(deltas))
	ds := make([]int64, 0, len(deltas))
	for id, d := range deltas {
		ids = append(ids, id)
		ds = append(ds, d)
	}
	return dbsqlc.StockAddDeltasParams{Ids: ids, Deltas: ds}
}

// ---- orders

type orderRepo struct{ *store }

func (r orderRepo) Insert(ctx context.Context, o *domain.Order) (*domain.Order, error) {
	row, err := r.q.OrderInsert(ctx, r.db, orderInsertParams(o))
	if err != nil {
		return nil, translate(err)
	}
	if err := r.q.OrderLinesInsert(ctx, r.db, orderLinesParams(o)); err != nil {
		return nil, translate(err)
	}
	return toOrder(row, o.Lines())
}

func orderInsertParams(o *domain.Order) dbsqlc.OrderInsertParams {
	return dbsqlc.OrderInsertParams{ID: o.ID(), CustomerID: o.CustomerID(), TotalCents: int64(o.Total())}
}

func orderLinesParams(o *domain.Order) dbsqlc.OrderLinesInsertParams {
	n := len(o.Lines())
	p := dbsqlc.OrderLinesInsertParams{
		OrderID:    o.ID(),
		LineNos:    make([]int32, n),
		ProductIds: make([]uuid.UUID, n),
		Quantities: make([]int32, n),
		UnitPrices: make([]int64, n),
	}
	for i, l := range o.Lines() {
		p.LineNos[i] = int32(i + 1)
		p.ProductIds[i] = l.ProductID
		p.Quantities[i] = int32(l.Quantity)
		p.UnitPrices[i] = int64(l.UnitPrice)
	}
	return p
}

func toOrder(r dbsqlc.Order, lines []domain.OrderLine) (*domain.Order, error) {
	st, err := domain.ParseOrderStatus(r.Status)
	if err != nil {
		return nil, err
	}
	return domain.RehydrateOrder(r.ID, r.CustomerID, st, lines, domain.Cents(r.TotalCents), domain.Cents(r.PaidCents),
		domain.Version(r.Version), r.CreatedAt, r.UpdatedAt), nil
}

// Get reads the order and its lines in one round trip: the lines are
// selected by the order id alone, so the second statement needs nothing from
// the first (and an order's lines never change once placed).
func (r orderRepo) Get(ctx context.Context, id uuid.UUID) (*domain.Order, error) {
	var o dbsqlc.Order
	var lines []dbsqlc.OrderLine
	var b batch
	b.add(func(db dbsqlc.DBTX) (err error) {
		o, err = r.q.OrderGet(ctx, db, id)
		return err
	})
	b.add(func(db dbsqlc.DBTX) (err error) {
		lines, err = r.q.OrderLinesGet(ctx, db, []uuid.UUID{id})
		return err
	})
	if err := b.send(ctx, r.db); err != nil {
		return nil, translate(err)
	}
	return toOrder(o, toOrderLines(lines))
}

func toOrderLines(rows []dbsqlc.OrderLine) []domain.OrderLine {
	var lines []domain.OrderLine
	for _, l := range rows {
		lines = append(lines, domain.OrderLine{ProductID: l.ProductID, Quantity: domain.Quantity(l.Quantity), UnitPrice: domain.Cents(l.UnitPriceCents)})
	}
	return lines
}

// withLines loads the lines of several orders in one query.
func (r orderRepo) withLines(ctx context.Context, rows []dbsqlc.Order) ([]*domain.Order, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	ids := make([]uuid.UUID, len(rows))
	for i, o := range rows {
		ids[i] = o.ID
	}
	lines, err := r.q.OrderLinesGet(ctx, r.db, ids)
	if err != nil {
		return nil, translate(err)
	}
	byOrder := make(map[uuid.UUID][]domain.OrderLine, len(rows))
	for _, l := range lines {
		byOrder[l.OrderID] = append(byOrder[l.OrderID], domain.OrderLine{
			ProductID: l.ProductID, Quantity: domain.Quantity(l.Quantity), UnitPrice: domain.Cents(l.UnitPriceCents),
		})
	}
	out := make([]*domain.Order, len(rows))
	for i, o := range rows {
		if out[i], err = toOrder(o, byOrder[o.ID]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (r orderRepo) List(ctx context.Context, customer uuid.UUID, p app.Page) ([]*domain.Order, error) {
	var rows []dbsqlc.Order
	var err error
	if customer == uuid.Nil {
		rows, err = r.q.OrderListAll(ctx, r.db, dbsqlc.OrderListAllParams{Before: before(p), RowLimit: int32(p.Limit)})
	} else {
		rows, err = r.q.OrderListByCustomer(ctx, r.db, dbsqlc.OrderListByCustomerParams{
			CustomerID: customer, Before: before(p), RowLimit: int32(p.Limit),
		})
	}
	if err != nil {
		return nil, translate(err)
	}
	return r.withLines(ctx, rows)
}

func (r orderRepo) SetStatus(ctx context.Context, o *domain.Order, expected domain.Version) (*domain.Order, error) {
	row, err := r.q.OrderSetStatus(ctx, r.db, dbsqlc.OrderSetStatusParams{ID: o.ID(), Version: int64(expected), Status: o.Status().String()})
	if err != nil {
		err = translate(err)
		if err == domain.ErrNotFound {
			// The order was read in this transaction, so it exists: the
			// version moved on under us.
			return nil, domain.ErrVersionConflict
		}
		return nil, err
	}
	return toOrder(row, o.Lines())
}

func (r orderRepo) AddPayment(ctx context.Context, orderID, actorID uuid.UUID, amount domain.Cents) (*domain.Order, bool, error) {
	row, err := r.q.OrderAddPayment(ctx, r.db, dbsqlc.OrderAddPaymentParams{ID: orderID, AmountCents: int64(amount)})
	if err != nil {
		err = translate(err)
		if err == domain.ErrNotFound {
			return nil, false, nil
		}
		return nil, false, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, false, err
	}
	if err := r.q.PaymentInsert(ctx, r.db, dbsqlc.PaymentInsertParams{ID: id, OrderID: orderID, ActorID: actorID, AmountCents: int64(amount)}); err != nil {
		return nil, false, translate(err)
	}
	o, err := toOrder(row, nil)
	return o, err == nil, err
}

// ---- actors

type actorRepo struct{ *store }

func toActor(r dbsqlc.Actor) (domain.Actor, error) {
	role, err := domain.ParseRole(r.Role)
	if err != nil {
		return domain.Actor{}, fmt.Errorf("stored actor %s: %w", r.ID, err)
	}
	return domain.Actor{ID: r.ID, Name: r.Name, Role: role, CreditLimitCents: domain.Cents(r.CreditLimitCents), Active: r.Active, CreatedAt: r.CreatedAt}, nil
}

func (r actorRepo) Insert(ctx context.Context, a domain.Actor, tokenHash []byte) (domain.Actor, error) {
	row, err := r.q.ActorInsert(ctx, r.db, dbsqlc.ActorInsertParams{ID: a.ID, Name: a.Name, Role: a.Role.String(), CreditLimitCents: int64(a.CreditLimitCents)})
	if err != nil {
		return domain.Actor{}, translate(err)
	}
	if err := r.q.TokenInsert(ctx, r.db, dbsqlc.TokenInsertParams{TokenHash: tokenHash, ActorID: a.ID}); err != nil {
		return domain.Actor{}, translate(err)
	}
	return toActor(row)
}

func (r actorRepo) Get(ctx context.Context, id uuid.UUID) (domain.Actor, error) {
	row, err := r.q.ActorGet(ctx, r.db, id)
	if err != nil {
		return domain.Actor{}, translate(err)
	}
	return toActor(row)
}

func (r actorRepo) LockForOrder(ctx context.Context, id uuid.UUID) (app.CreditState, error) {
	row, err := r.q.ActorLockForOrder(ctx, r.db, id)
	if err != nil {
		return app.CreditState{}, translate(err)
	}
	return toCreditState(row), nil
}

func toCreditState(r dbsqlc.ActorLockForOrderRow) app.CreditState {
	return app.CreditState{Limit: domain.Cents(r.CreditLimitCents), Balance: domain.Cents(r.BalanceCents), Active: r.Active}
}

func (r actorRepo) ChargeBalance(ctx context.Context, customer uuid.UUID, amount domain.Cents) (bool, error) {
	n, err := r.q.ActorChargeBalance(ctx, r.db, dbsqlc.ActorChargeBalanceParams{ID: customer, AmountCents: int64(amount)})
	return n == 1, translate(err)
}

func (r actorRepo) ReleaseBalance(ctx context.Context, customer uuid.UUID, amount domain.Cents) error {
	n, err := r.q.ActorReleaseBalance(ctx, r.db, dbsqlc.ActorReleaseBalanceParams{ID: customer, AmountCents: int64(amount)})
	if err != nil {
		return translate(err)
	}
	return releaseRefused(customer, amount, n)
}

// releaseRefused turns a release that updated no row into an error: the
// balance is smaller than what the customer's orders say they still owe,
// so it differs from them. It is not the caller's doing; `api check` lists
// every such balance.
func releaseRefused(customer uuid.UUID, amount domain.Cents, rows int64) error {
	if rows == 1 {
		return nil
	}
	return fmt.Errorf("release %d cents from the balance of customer %s: the balance is missing or smaller, so it differs from the orders (run api check)", amount, customer)
}

func (r actorRepo) CountOtherActiveStaff(ctx context.Context, id uuid.UUID) (int64, error) {
	n, err := r.q.ActorCountOtherActiveStaff(ctx, r.db, id)
	return n, translate(err)
}

func (r actorRepo) Deactivate(ctx context.Context, id uuid.UUID) (domain.Actor, error) {
	row, err := r.q.ActorDeactivate(ctx, r.db, id)
	if err != nil {
		return domain.Actor{}, translate(err)
	}
	return toActor(row)
}

func (r actorRepo) ByTokenHash(ctx context.Context, hash []byte) (app.Principal, error) {
	row, err := r.q.ActorByTokenHash(ctx, r.db, hash)
	if err != nil {
		return app.Principal{}, translate(err)
	}
	role, err := domain.ParseRole(row.Role)
	if err != nil {
		return app.Principal{}, err
	}
	return app.Principal{ID: row.ID, Role: role, Active: row.Active}, nil
}
