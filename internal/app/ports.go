package app

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// Isolation is a transaction isolation level.
type Isolation int

// Isolation levels. ReadCommitted is the default: races are closed by atomic
// statements, row locks and constraints. Serializable is for invariants that no
// single row lock covers, and always runs under the runner's retry loop.
const (
	ReadCommitted Isolation = iota
	Serializable
)

// Transactor gives the use cases their repositories, in a transaction or
// without one. InTx runs fn in one database transaction, with the
// repositories bound to it. Implementations retry the whole function on
// serialization failures and deadlocks (40001, 40P01) with bounded, jittered
// backoff, so fn must be safe to run again: it may not keep state between
// attempts or touch the network.
//
// auth is the request's token check (Authenticate.Handle), or nil for work
// that no request's token authorizes (tests, tools). The repositories are
// bound to a connection that carries it: its next round trip sends the
// check while it is pending, in front of the first statement, and a
// refused check fails that statement (ADR 0005). A retry reads it again
// (AuthCheck.Recheck, ADR 0011).
type Transactor interface {
	InTx(ctx context.Context, auth *AuthCheck, iso Isolation, fn func(ctx context.Context, repos Repositories) error) error
	// WithoutTx gives repositories that run each statement on its own,
	// outside any explicit transaction, on a connection that carries auth
	// as InTx's does: for queries, which read one statement's snapshot
	// and lock nothing.
	WithoutTx(auth *AuthCheck) Repositories
}

// Reader runs the queries' reads. With no read replica it reads the
// primary, like Transactor.WithoutTx. With one (READ_DATABASE_URL), it
// answers a read from the replica only when the replica can prove that it
// has applied every write committed before the read began, so that no
// caller sees the past: not the client that just placed or changed
// something, nor the webhook receiver that fetches what an event names.
// The request's token check is read from the primary first, so a
// deactivation stops a token at once (ADR 0005, ADR 0023).
type Reader interface {
	// Read runs read on repositories that see every write committed before
	// Read was called, and returns read's error. An implementation with a
	// replica tries it first; when the replica is behind, down or fails,
	// when read returns an error there (not found included: it may not have
	// the row yet), or when current, if given, says the replica's answer is
	// older than what the caller has seen, it runs read again on the
	// primary, whose answer is final. read must therefore be safe to run
	// twice and keep only its last answer. auth is the request's token
	// check, as for Transactor.InTx; it is settled on the primary.
	Read(ctx context.Context, auth *AuthCheck, read func(ctx context.Context, repos Repositories) error, current func() bool) error
}

// Repositories is the set of repositories a use case works with, all bound
// to one connection: the transaction of Transactor.InTx, or none
// (Transactor.WithoutTx), with the request's token check. It is not a transaction itself: it neither
// commits nor rolls back.
type Repositories interface {
	Products() ProductRepo
	Stock() StockRepo
	Orders() OrderRepo
	Actors() ActorRepo
	Placement() PlacementStore
	Keys() KeyStore
	Outbox() OutboxRepo
}

// ProductRepo stores the catalogue. Update is guarded by the version and
// returns ErrNotFound or ErrVersionConflict when its guard refuses.
type ProductRepo interface {
	Insert(ctx context.Context, p *domain.Product) (*domain.Product, error)
	Get(ctx context.Context, id uuid.UUID) (*domain.Product, error)
	List(ctx context.Context, page Page) ([]*domain.Product, error)
	// Update applies patch only if the product is still at version expected.
	Update(ctx context.Context, id uuid.UUID, expected domain.Version, patch domain.ProductPatch) (*domain.Product, error)
}

// StockRepo stores stock levels, one per product. Its writes add deltas and
// commute, so none takes an expected version; a guard refuses to go below
// zero (*domain.InsufficientStockError), and ErrNotFound names a missing
// product.
type StockRepo interface {
	Insert(ctx context.Context, s *domain.StockLevel) (*domain.StockLevel, error)
	Get(ctx context.Context, productID uuid.UUID) (*domain.StockLevel, error)
	List(ctx context.Context, page Page) ([]*domain.StockLevel, error)
	// Adjust adds a delta in one guarded statement that refuses to go below
	// zero, and records the adjustment.
	Adjust(ctx context.Context, actorID uuid.UUID, adj domain.StockAdjustment) (*domain.StockLevel, error)
	// LockRows locks the stock rows of ids FOR NO KEY UPDATE, in product
	// id order (the global lock order), and returns them with each
	// product's catalogue price, read (not locked) by the same statement.
	LockRows(ctx context.Context, ids []uuid.UUID) ([]domain.StockRow, error)
	// AddStock applies deltas to rows already locked by LockRows.
	AddStock(ctx context.Context, deltas map[uuid.UUID]int64) error
}

// PlacementStore runs a placement's statements: the locks it decides on,
// then the writes of what it decided (domain.Place). Its statements are
// exactly those of the repository methods named below, in the same order, so
// it takes the same locks in the same global order and reads and writes the
// same rows whichever way an implementation sends them: one call at a time,
// or pipelined in two round trips (internal/infra/store/placement.go).
type PlacementStore interface {
	// LockForPlacement runs ActorRepo.LockForOrder (the customer's row lock
	// first) and StockRepo.LockRows (the stock rows' locks, by product
	// id, with the catalogue prices), in this order.
	LockForPlacement(ctx context.Context, customer uuid.UUID, ids []uuid.UUID) (PlacementLocks, error)
	// WritePlacement runs ActorRepo.ChargeBalance (the order's total onto
	// the customer's balance), StockRepo.AddStock and OrderRepo.Insert, in
	// this order, on the rows LockForPlacement locked. A refused charge is
	// domain.ErrCreditRefused.
	WritePlacement(ctx context.Context, o *domain.Order, take map[uuid.UUID]int64) (*domain.Order, error)
}

// PlacementLocks is what placement reads under its locks.
type PlacementLocks struct {
	Credit domain.Credit
	Rows   []domain.StockRow
}

// OrderRepo stores orders.
type OrderRepo interface {
	Insert(ctx context.Context, o *domain.Order) (*domain.Order, error)
	Get(ctx context.Context, id uuid.UUID) (*domain.Order, error)
	// List returns orders newest first; a zero customer lists every order.
	List(ctx context.Context, customer uuid.UUID, page Page) ([]*domain.Order, error)
	// SetStatus stores o's status only if the stored order is still at
	// version expected; otherwise domain.ErrVersionConflict.
	SetStatus(ctx context.Context, o *domain.Order, expected domain.Version) (*domain.Order, error)
	// AddPayment increments paid_cents in one guarded statement; it returns
	// nil and false when the guard refused (cancelled or overpaid).
	AddPayment(ctx context.Context, orderID, actorID uuid.UUID, amount domain.Cents) (*domain.Order, bool, error)
	// AddRefund increments refunded_cents in one guarded statement and
	// records the refund; it returns nil and false when the guard refused
	// (not cancelled, or beyond what was paid).
	AddRefund(ctx context.Context, orderID, actorID uuid.UUID, refund domain.Refund) (*domain.Order, bool, error)
}

// ActorRepo stores actors and their tokens.
type ActorRepo interface {
	Insert(ctx context.Context, a domain.Actor, tokenHash []byte) (domain.Actor, error)
	Get(ctx context.Context, id uuid.UUID) (domain.Actor, error)
	// LockForOrder locks the customer's row and returns its credit state.
	LockForOrder(ctx context.Context, id uuid.UUID) (domain.Credit, error)
	// ChargeBalance adds amount to the customer's balance in one guarded
	// statement that refuses to pass the credit limit; it reports false
	// when the guard refused, and the transaction can then only roll back.
	ChargeBalance(ctx context.Context, customer uuid.UUID, amount domain.Cents) (bool, error)
	// ReleaseBalance takes amount off the customer's balance in one guarded
	// statement that refuses to go below zero; a refusal is an error, since
	// only a balance that differs from its orders can cause it.
	ReleaseBalance(ctx context.Context, customer uuid.UUID, amount domain.Cents) error
	CountOtherActiveStaff(ctx context.Context, id uuid.UUID) (int64, error)
	Deactivate(ctx context.Context, id uuid.UUID) (domain.Actor, error)
	ByTokenHash(ctx context.Context, hash []byte) (Principal, error)
}

// OutboxRepo appends events to the transactional outbox. An event appended in
// a transaction is published if and only if that transaction commits; a
// dispatcher delivers it afterwards, outside any transaction.
//
// Append is a use case's last write: an implementation may send it with the
// COMMIT, and its error then comes out of Transactor.InTx.
type OutboxRepo interface {
	Append(ctx context.Context, e Event) error
}

// Page selects one page of a newest-first list: items created before Before
// (the zero value means from the newest), at most Limit.
type Page struct {
	Before uuid.UUID
	Limit  int
}

// Principal is the authenticated caller of a request.
type Principal struct {
	ID     uuid.UUID
	Role   domain.Role
	Active bool
}

// IsStaff says whether the principal has the staff role.
func (p Principal) IsStaff() bool { return p.Role == domain.RoleStaff }

// Receipt is a command's response as the caller sees it, kept opaque here: the
// HTTP layer renders it, the key store keeps it for replay
// (EXT.IDEMPOTENCY.OUTCOME.001).
// Patterns and rule ids: docs/patterns.md.
type Receipt struct {
	Status int
	Header map[string]string // only the safe headers: Location, ETag, Content-Type
	Body   []byte
}

// Key identifies one idempotent request: the actor, the operation and the
// client's key (EXT.IDEMPOTENCY.KEY.001), with the fingerprint of the request.
// Patterns and rule ids: docs/patterns.md.
type Key struct {
	ActorID     uuid.UUID
	Operation   string
	Value       string
	Fingerprint [32]byte
	// Previous is the request's fingerprint under its operation's previous
	// canonical form while that form is still accepted (zero when there is
	// none): a record written before the form changed matches it and
	// replays. One array, not a list, so that a Key stays comparable.
	Previous [32]byte
}

// KeyStore keeps idempotency records in the caller's transaction.
type KeyStore interface {
	// Claim takes the key for the current transaction and returns nil, or
	// returns the receipt of the completed request that holds it. A duplicate
	// that is still in flight is waited for; see ErrKeyInProgress. An
	// implementation may send the claim with the transaction's next
	// statement and return nil at once: what the claim finds is then that
	// statement's error (*PriorReceipt for a completed duplicate), or the
	// transaction's when no statement follows.
	Claim(ctx context.Context, k Key) (*Receipt, error)
	// Complete stores the receipt on the claimed key. It is the last
	// statement of the transaction, and an implementation may send it with
	// the COMMIT; its error then comes out of Transactor.InTx.
	Complete(ctx context.Context, k Key, r Receipt) error
}

// KeyLatch makes the requests of one process that carry the same key wait
// for each other before they take a connection, so that duplicates of a slow
// request do not hold the pool while they wait. It is optional and declared:
// a command runs with the latch it was given (Deps.Latch), and without one
// its duplicates meet on the key's row in the database (KeyStore.Claim).
// LatchKey returns when no other request of the process holds k (then the
// caller holds it until release) or, past IDEMPOTENCY_WAIT, with
// *KeyInProgressError. The context it returns is the one to run the request
// with: the claim's own wait counts from the same budget. A request that
// waited has its token check auth (nil for none) read again before it acts
// or answers (AuthCheck.Recheck, ADR 0011).
type KeyLatch interface {
	LatchKey(ctx context.Context, auth *AuthCheck, k Key) (context.Context, func(), error)
}

// Errors of the key store, mapped to problems by the HTTP layer.
var (
	// ErrKeyReused: the key holds a completed request with another fingerprint.
	ErrKeyReused = errors.New("idempotency key reused with a different request")
	// ErrUnavailable: the database cannot be reached or did not answer in time.
	ErrUnavailable = errors.New("database unavailable")
)

// KeyInProgressError: another request with the key was still in flight when
// the wait ran out.
type KeyInProgressError struct {
	RetryAfter time.Duration
}

func (e *KeyInProgressError) Error() string {
	return "a request with this idempotency key is still in progress"
}

// PriorReceipt is how a KeyStore whose claim went out with a later
// statement reports that the key holds a completed request with the same
// fingerprint: as that statement's error (so the transaction rolls back),
// which execute answers with the replay of Receipt.
type PriorReceipt struct {
	Receipt Receipt
}

func (e *PriorReceipt) Error() string {
	return "the idempotency key holds a completed request: replay it"
}
