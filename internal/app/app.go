// Package app holds the use cases, one file each, named after it: commands
// (place_order.go, cancel_order.go, …) change state in one transaction
// through Transactor.InTx and execute; queries (get_order.go,
// list_orders.go, …) read without a transaction through a Reader, which
// may answer from a read replica (read.go). Each use case's doc comment
// names the invariant it protects, the mechanism, and the error codes it
// returns. Commands that take an idempotency key may also return
// idempotency_key_reused, idempotency_in_progress and unavailable
// (execute), and every use case unauthenticated when its caller's token was
// revoked in between. The request's token check (AuthCheck) is a value
// every use case is given, Call.Auth for a command and an auth argument for
// a query, and passes on to the connection its statements go out on.
//
// The package owns the transaction boundary (Transactor, ports.go) but not
// its implementation (internal/infra). UseCases gathers every use case.
package app

// UseCases is every use case of the service, wired to one Transactor, one
// Reader and, optionally, one KeyLatch (Deps).
type UseCases struct {
	Authenticate Authenticate

	// Commands.
	CreateActor     CreateActor
	DeactivateActor DeactivateActor
	CreateProduct   CreateProduct
	UpdateProduct   UpdateProduct
	AdjustStock     AdjustStock
	PlaceOrder      PlaceOrder
	CancelOrder     CancelOrder
	ShipOrder       ShipOrder
	RecordPayment   RecordPayment
	RecordRefund    RecordRefund

	// Queries.
	GetProduct   GetProduct
	ListProducts ListProducts
	GetStock     GetStock
	ListStock    ListStock
	GetOrder     GetOrder
	ListOrders   ListOrders
}

// Deps is what the use cases are wired to, each seam declared.
type Deps struct {
	// Transactor runs the commands and the token check.
	Transactor Transactor
	// Reader runs the queries.
	Reader Reader
	// Latch, when not nil, makes a command's duplicates in this process
	// wait for each other in memory before they take a connection
	// (KeyLatch); nil leaves them to meet on the key's row.
	Latch KeyLatch
}

// New wires the commands and the token check to d.Transactor (the commands
// with d.Latch), the queries to d.Reader.
func New(d Deps) UseCases {
	t, r, l := d.Transactor, d.Reader, d.Latch
	return UseCases{
		Authenticate: Authenticate{Transactor: t, Cache: NewTokenCache(100_000)},

		CreateActor:     CreateActor{Transactor: t},
		DeactivateActor: DeactivateActor{Transactor: t, Latch: l},
		CreateProduct:   CreateProduct{Transactor: t, Latch: l},
		UpdateProduct:   UpdateProduct{Transactor: t, Latch: l},
		AdjustStock:     AdjustStock{Transactor: t, Latch: l},
		PlaceOrder:      PlaceOrder{Transactor: t, Latch: l},
		CancelOrder:     CancelOrder{Transactor: t, Latch: l},
		ShipOrder:       ShipOrder{Transactor: t, Latch: l},
		RecordPayment:   RecordPayment{Transactor: t, Latch: l},
		RecordRefund:    RecordRefund{Transactor: t, Latch: l},

		GetProduct:   GetProduct{Reader: r},
		ListProducts: ListProducts{Reader: r},
		GetStock:     GetStock{Reader: r},
		ListStock:    ListStock{Reader: r},
		GetOrder:     GetOrder{Reader: r},
		ListOrders:   ListOrders{Reader: r},
	}
}
