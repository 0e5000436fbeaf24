package store

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

type orderRepo struct{ *repositories }

// orderConstraint says what a broken constraint of orders means
// (outcomeOfConstraint): the CHECKs behind the guarded increments
// (OrderAddPayment, OrderAddRefund), each its rule's code.
func orderConstraint(e *pgconn.PgError) *domain.Error {
	switch e.ConstraintName {
	case "orders_paid_within_total":
		return domain.Errorf(domain.CodeOverpayment, "payment exceeds the remaining balance")
	case "orders_refund_within_paid":
		return domain.Errorf(domain.CodeOverRefund, "refund exceeds what was paid and not yet refunded")
	}
	return nil
}

func (r orderRepo) Insert(ctx context.Context, o *domain.Order) (*domain.Order, error) {
	row, err := r.q.OrderInsert(ctx, r.db, orderInsertParams(o, creationTime()))
	if err != nil {
		return nil, wrap("orders.insert", err)
	}
	if err := r.q.OrderLinesInsert(ctx, r.db, orderLinesParams(o)); err != nil {
		return nil, wrap("orders.insert", err)
	}
	return toOrder(row, o.Lines())
}

func orderInsertParams(o *domain.Order, at time.Time) dbsqlc.OrderInsertParams {
	return dbsqlc.OrderInsertParams{ID: o.ID(), CustomerID: o.CustomerID(), TotalCents: int64(o.Total()), CreatedAt: at}
}

// creationTime is a new row's created_at, read from the service's clock
// like a new id, to the microsecond that PostgreSQL keeps: the order the
// service answers with is then the one stored.
func creationTime() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

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
	return domain.RehydrateOrder(domain.OrderRecord{
		ID: r.ID, CustomerID: r.CustomerID, Status: st, Lines: lines,
		Total: domain.Cents(r.TotalCents), Paid: domain.Cents(r.PaidCents), Refunded: domain.Cents(r.RefundedCents),
		Version: domain.Version(r.Version), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}), nil
}

// Get reads the order with its lines in one statement (OrderGet joins
// them): one round trip, the token check in front of it.
func (r orderRepo) Get(ctx context.Context, id uuid.UUID) (*domain.Order, error) {
	rows, err := r.q.OrderGet(ctx, r.db, id)
	if err != nil {
		return nil, wrap("orders.get", err)
	}
	if len(rows) == 0 {
		return nil, domain.ErrNotFound
	}
	lines := make([]domain.OrderLine, len(rows))
	for i, l := range rows {
		lines[i] = domain.OrderLine{ProductID: l.ProductID, Quantity: domain.Quantity(l.Quantity), UnitPrice: domain.Cents(l.UnitPriceCents)}
	}
	return toOrder(rows[0].Order, lines)
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
		return nil, wrap("orders.with_lines", err)
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
		return nil, wrap("orders.list", err)
	}
	return r.withLines(ctx, rows)
}

func (r orderRepo) SetStatus(ctx context.Context, o *domain.Order, expected domain.Version) (*domain.Order, error) {
	row, err := r.q.OrderSetStatus(ctx, r.db, dbsqlc.OrderSetStatusParams{ID: o.ID(), Version: int64(expected), Status: o.Status().String()})
	if err != nil {
		err = wrap("orders.set_status", err)
		if errors.Is(err, domain.ErrNotFound) {
			// The order was read in this transaction, so it exists: the
			// version moved on under us.
			return nil, domain.ErrVersionConflict
		}
		return nil, err
	}
	return toOrder(row, o.Lines())
}

func (r orderRepo) AddPayment(ctx context.Context, orderID, actorID uuid.UUID, amount domain.Cents) (*domain.Order, bool, error) {
	return r.addMoney("orders.add_payment", func() (dbsqlc.Order, error) {
		return r.q.OrderAddPayment(ctx, r.db, dbsqlc.OrderAddPaymentParams{ID: orderID, AmountCents: int64(amount)})
	}, func(id uuid.UUID) error {
		return r.q.PaymentInsert(ctx, r.db, dbsqlc.PaymentInsertParams{ID: id, OrderID: orderID, ActorID: actorID, AmountCents: int64(amount)})
	})
}

func (r orderRepo) AddRefund(ctx context.Context, orderID, actorID uuid.UUID, refund domain.Refund) (*domain.Order, bool, error) {
	return r.addMoney("orders.add_refund", func() (dbsqlc.Order, error) {
		return r.q.OrderAddRefund(ctx, r.db, dbsqlc.OrderAddRefundParams{ID: orderID, AmountCents: int64(refund.Amount)})
	}, func(id uuid.UUID) error {
		return r.q.RefundInsert(ctx, r.db, dbsqlc.RefundInsertParams{
			ID: id, OrderID: orderID, ActorID: actorID, AmountCents: int64(refund.Amount), Reason: refund.Reason,
		})
	})
}

// addMoney is a payment's or a refund's two writes: update, the guarded
// change of the order's paid or refunded cents, then insert, the record of
// the money under a new id. An update that matched no row (the order is
// missing, or its guard refused) is (nil, false, nil), for the use case to
// tell which; a constraint's refusal is its domain error.
func (r orderRepo) addMoney(op string, update func() (dbsqlc.Order, error), insert func(id uuid.UUID) error) (*domain.Order, bool, error) {
	row, err := update()
	if err != nil {
		err = wrap(op, err)
		if errors.Is(err, domain.ErrNotFound) {
			return nil, false, nil
		}
		return nil, false, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, false, err
	}
	if err := insert(id); err != nil {
		return nil, false, wrap(op, err)
	}
	o, err := toOrder(row, nil)
	return o, err == nil, err
}
