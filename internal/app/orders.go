package app

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// PlaceOrder places a customer's order and takes its stock.
//
// Invariants: stock never goes below zero (no overselling), and a customer's
// outstanding balance never exceeds their credit limit.
//
// Mechanism, in one READ COMMITTED transaction with no network inside it:
//  1. Lock the customer's actor row FOR NO KEY UPDATE and read its credit
//     state: the limit and the maintained outstanding balance. Every write
//     that moves the balance needs this row, so the balance read stays
//     current until COMMIT, and the customer's placements serialize here.
//  2. Lock every stock row of the order in product id order (SELECT … ORDER
//     BY product_id FOR NO KEY UPDATE OF stock_levels, pattern 3). One global
//     lock order, customer then stock rows by product id, means that orders
//     with reversed lines queue instead of deadlocking. The same statement
//     reads each product's catalogue price without locking the product row:
//     the price taken is the one committed when that statement runs, and a
//     price edit (UpdateProduct) neither waits for a placement nor makes one
//     wait, since the two aggregates share no lock.
//  3. Check every line against the locked stock; one short line rejects the
//     whole order and takes nothing. Then check balance + total against the
//     limit. Nothing sums the customer's orders: the cost does not grow
//     with their history.
//  4. Add the total to the balance (a guarded atomic statement, pattern 2,
//     that refuses to pass the limit), decrement stock, insert the order
//     and its lines, append order.placed to the outbox, and store the
//     idempotency record. CHECK (stock >= 0) and CHECK (balance_cents >= 0)
//     are the last line of defence.
//
// Steps 1 and 2's statements go to the server in one round trip and step
// 4's in another when the repositories pipeline them (PlacementStore); the statements
// and their order are the same either way.
//
// Codes: forbidden (not a customer), validation_failed (unknown product),
// insufficient_stock, credit_limit_exceeded, and the key codes.
type PlaceOrder struct{ Transactor Transactor }

// PlaceOrderCommand is the input of PlaceOrder.
type PlaceOrderCommand struct {
	Lines []domain.LineRequest
}

// Handle runs the command.
func (h PlaceOrder) Handle(ctx context.Context, cmd PlaceOrderCommand, call Call[*domain.Order]) (Outcome, error) {
	if call.Principal.Role != domain.RoleCustomer {
		return Outcome{}, domain.Errorf(domain.CodeForbidden, "only customers place orders")
	}
	customer := call.Principal.ID
	ids := make([]uuid.UUID, len(cmd.Lines))
	for i, l := range cmd.Lines {
		ids[i] = l.ProductID
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return compareUUID(a, b) })

	return execute(ctx, h.Transactor, ReadCommitted, call, func(ctx context.Context, repos Repositories) (*domain.Order, error) {
		store := placementStore(repos)
		locked, err := store.LockForPlacement(ctx, customer, ids)
		if err != nil {
			return nil, err
		}
		if !locked.Credit.Active {
			return nil, ErrUnauthenticated
		}
		byID := make(map[uuid.UUID]StockRow, len(locked.Rows))
		for _, r := range locked.Rows {
			byID[r.ID] = r
		}
		var v domain.Validation
		lines := make([]domain.OrderLine, len(cmd.Lines))
		take := make(map[uuid.UUID]int64, len(cmd.Lines))
		for i, l := range cmd.Lines {
			r, ok := byID[l.ProductID]
			if !ok {
				v.Add(fmt.Sprintf("lines[%d].product_id", i), "no such product")
				continue
			}
			lines[i] = domain.OrderLine{ProductID: l.ProductID, Quantity: l.Quantity, UnitPrice: r.Price}
			take[l.ProductID] = -int64(l.Quantity)
		}
		if err := v.Err(); err != nil {
			return nil, err
		}
		for _, l := range cmd.Lines {
			if r := byID[l.ProductID]; r.Stock < int64(l.Quantity) {
				return nil, &domain.InsufficientStockError{ProductID: l.ProductID, Requested: int64(l.Quantity), Available: r.Stock}
			}
		}
		id, err := uuid.NewV7()
		if err != nil {
			return nil, err
		}
		order, err := domain.PlaceOrder(id, customer, lines)
		if err != nil {
			return nil, err
		}
		if err := locked.Credit.CheckOrder(order.Total()); err != nil {
			return nil, err
		}
		placed, err := store.WritePlacement(ctx, order, take)
		if err != nil {
			return nil, err
		}
		if err := repos.Outbox().Append(ctx, orderEvent(EventOrderPlaced, placed)); err != nil {
			return nil, err
		}
		return placed, nil
	})
}

// placementStore returns tx's pipelined placement statements when it has
// them, else the same statements one repository call at a time.
func placementStore(repos Repositories) PlacementStore {
	if p, ok := repos.(PlacementStore); ok {
		return p
	}
	return stepwisePlacement{repos}
}

// stepwisePlacement is PlacementStore built from the repositories.
type stepwisePlacement struct{ repos Repositories }

func (s stepwisePlacement) LockForPlacement(ctx context.Context, customer uuid.UUID, ids []uuid.UUID) (PlacementLocks, error) {
	credit, err := s.repos.Actors().LockForOrder(ctx, customer)
	if err != nil || !credit.Active {
		return PlacementLocks{Credit: credit}, err
	}
	rows, err := s.repos.Stock().LockRows(ctx, ids)
	if err != nil {
		return PlacementLocks{}, err
	}
	return PlacementLocks{Credit: credit, Rows: rows}, nil
}

func (s stepwisePlacement) WritePlacement(ctx context.Context, o *domain.Order, take map[uuid.UUID]int64) (*domain.Order, error) {
	ok, err := s.repos.Actors().ChargeBalance(ctx, o.CustomerID(), o.Total())
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrCreditRefused
	}
	if err := s.repos.Stock().AddStock(ctx, take); err != nil {
		return nil, err
	}
	return s.repos.Orders().Insert(ctx, o)
}

func compareUUID(a, b uuid.UUID) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// Orders answers the order queries.
type Orders struct{ Transactor Transactor }

// Get returns an order visible to the caller. Another customer's order is
// reported as not found, so that its existence is not revealed.
func (q Orders) Get(ctx context.Context, p Principal, id uuid.UUID) (*domain.Order, error) {
	o, err := q.Transactor.WithoutTx().Orders().Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if !o.VisibleTo(p.ID, p.Role) {
		return nil, domain.ErrNotFound
	}
	return o, nil
}

// List returns a page of the caller's orders (staff: every order), newest first.
func (q Orders) List(ctx context.Context, p Principal, page Page) ([]*domain.Order, error) {
	customer := p.ID
	if p.IsStaff() {
		customer = uuid.Nil
	}
	return q.Transactor.WithoutTx().Orders().List(ctx, customer, page)
}

// TransitionOrder cancels or ships an order.
//
// Invariants: a shipped order is never cancelled, a cancelled order is never
// shipped, a cancelled order's stock returns exactly once, and the customer's
// balance stops counting a cancelled order exactly once. Mechanism:
// optimistic concurrency driven by If-Match (pattern 4): the domain checks the
// move on the order as read, and UPDATE … WHERE id = $1 AND version = $2
// stores it only if nobody changed the order since. Of a concurrent cancel and
// ship carrying the same ETag, exactly one matches the version; the other
// updates zero rows and gets version_conflict. Cancel then, in the same
// transaction and so exactly once, takes what the order still owed (total -
// paid of the row the guarded update returned) off the customer's balance
// with a guarded atomic statement (pattern 2), and returns the stock, locking
// the stock rows in product id order like placement does: order, then
// customer, then stock rows. Ship moves nothing: a shipped order still
// counts. The
// order.cancelled or order.shipped event is appended in the same transaction.
// Codes: forbidden
// (a customer shipping), not_found (missing or another customer's order),
// version_conflict, invalid_transition.
type TransitionOrder struct{ Transactor Transactor }

// Transition names an order move.
type Transition int

// The order moves.
const (
	Cancel Transition = iota + 1
	Ship
)

// TransitionOrderCommand is the input of TransitionOrder.
type TransitionOrderCommand struct {
	ID   uuid.UUID
	Move Transition
	// Expected lists the versions the caller's If-Match names; the move
	// applies when the order is at any of them (RFC 9110 §13.1.1).
	Expected []domain.Version
}

// Handle runs the command.
func (h TransitionOrder) Handle(ctx context.Context, cmd TransitionOrderCommand, call Call[*domain.Order]) (Outcome, error) {
	if cmd.Move == Ship {
		if err := requireStaff(call.Principal); err != nil {
			return Outcome{}, err
		}
	}
	p := call.Principal
	return execute(ctx, h.Transactor, ReadCommitted, call, func(ctx context.Context, repos Repositories) (*domain.Order, error) {
		o, err := repos.Orders().Get(ctx, cmd.ID)
		if err != nil {
			return nil, err
		}
		if !o.VisibleTo(p.ID, p.Role) {
			return nil, domain.ErrNotFound
		}
		if !slices.Contains(cmd.Expected, o.Version()) {
			return nil, domain.ErrVersionConflict
		}
		switch cmd.Move {
		case Cancel:
			err = o.Cancel()
		case Ship:
			err = o.Ship()
		default:
			err = fmt.Errorf("unknown order transition %d", cmd.Move)
		}
		if err != nil {
			return nil, err
		}
		updated, err := repos.Orders().SetStatus(ctx, o, o.Version())
		if err != nil {
			return nil, err
		}
		if cmd.Move == Cancel {
			if err := repos.Actors().ReleaseBalance(ctx, updated.CustomerID(), updated.Outstanding()); err != nil {
				return nil, err
			}
			ids := make([]uuid.UUID, 0, len(o.Lines()))
			back := make(map[uuid.UUID]int64, len(o.Lines()))
			for _, l := range o.Lines() {
				ids = append(ids, l.ProductID)
				back[l.ProductID] += int64(l.Quantity)
			}
			slices.SortFunc(ids, compareUUID)
			if _, err := repos.Stock().LockRows(ctx, ids); err != nil {
				return nil, err
			}
			if err := repos.Stock().AddStock(ctx, back); err != nil {
				return nil, err
			}
		}
		ev := EventOrderShipped
		if cmd.Move == Cancel {
			ev = EventOrderCancelled
		}
		if err := repos.Outbox().Append(ctx, orderEvent(ev, updated)); err != nil {
			return nil, err
		}
		return updated, nil
	})
}

// RecordPayment records a payment against an order.
//
// Invariants: paid_cents never exceeds total_cents, a cancelled order takes no
// payment, a payment is counted once, and the customer's balance goes down by
// exactly what was paid. Mechanism: one guarded atomic increment (pattern 2),
// UPDATE … SET paid_cents = paid_cents + n WHERE paid_cents + n <= total_cents
// AND status <> 'cancelled', backed by a CHECK constraint; then, in the same
// transaction, UPDATE actors SET balance_cents = balance_cents - n (guarded,
// pattern 2): concurrent payments and placements of one customer queue on
// that row and none is lost. The required key makes a retried payment replay
// instead of counting twice. payment.recorded is appended in the same
// transaction.
// Codes: not_found, invalid_transition, overpayment.
type RecordPayment struct{ Transactor Transactor }

// RecordPaymentCommand is the input of RecordPayment.
type RecordPaymentCommand struct {
	OrderID uuid.UUID
	Amount  domain.Cents
}

// PaymentRecorded is the result of RecordPayment.
type PaymentRecorded struct {
	OrderID uuid.UUID
	Amount  domain.Cents
	Paid    domain.Cents
}

// Handle runs the command.
func (h RecordPayment) Handle(ctx context.Context, cmd RecordPaymentCommand, call Call[PaymentRecorded]) (Outcome, error) {
	p := call.Principal
	return execute(ctx, h.Transactor, ReadCommitted, call, func(ctx context.Context, repos Repositories) (PaymentRecorded, error) {
		o, err := repos.Orders().Get(ctx, cmd.OrderID)
		if err != nil {
			return PaymentRecorded{}, err
		}
		if !o.VisibleTo(p.ID, p.Role) {
			return PaymentRecorded{}, domain.ErrNotFound
		}
		updated, ok, err := repos.Orders().AddPayment(ctx, cmd.OrderID, p.ID, cmd.Amount)
		if err != nil {
			return PaymentRecorded{}, err
		}
		if !ok {
			// The guard refused. Explain why from the current state.
			now, err := repos.Orders().Get(ctx, cmd.OrderID)
			if err != nil {
				return PaymentRecorded{}, err
			}
			if err := now.CheckPayment(cmd.Amount); err != nil {
				return PaymentRecorded{}, err
			}
			return PaymentRecorded{}, domain.Errorf(domain.CodeOverpayment, "payment of %d cents exceeds the remaining balance", cmd.Amount)
		}
		if err := repos.Actors().ReleaseBalance(ctx, updated.CustomerID(), cmd.Amount); err != nil {
			return PaymentRecorded{}, err
		}
		if err := repos.Outbox().Append(ctx, Event{Type: EventPaymentRecorded, AggregateID: updated.ID(), Data: PaymentEventData{
			OrderID: updated.ID(), CustomerID: updated.CustomerID(), AmountCents: int64(cmd.Amount),
			PaidCents: int64(updated.Paid()), TotalCents: int64(updated.Total()), OrderStatus: updated.Status().String(),
		}}); err != nil {
			return PaymentRecorded{}, err
		}
		return PaymentRecorded{OrderID: updated.ID(), Amount: cmd.Amount, Paid: updated.Paid()}, nil
	})
}
