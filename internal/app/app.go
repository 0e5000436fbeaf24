// Package app holds the use cases, one file each, named after it: commands
// (place_order.go, cancel_order.go, …) change state in one transaction
// through Transactor.InTx and execute; queries (get_order.go,
// list_orders.go, …) read without a transaction through a Reader, which
// may answer from a read replica (read.go). Each use case's doc comment
// names the invariant it protects, the mechanism, and the error codes it
// returns. Commands that take an idempotency key may also return
// idempotency_key_reused, idempotency_in_progress and unavailable
// (execute), and every use case unauthenticated when its caller's token was
// revoked in between.
//
// The package owns the transaction boundary (Transactor, ports.go) but not
// its implementation (internal/infra). UseCases gathers every use case.
package app

// UseCases is every use case of the service, wired to one Transactor and
// one Reader.
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

// New wires the commands and the token check to t, the queries to r.
func New(t Transactor, r Reader) UseCases {
	return UseCases{
		Authenticate: Authenticate{Transactor: t, Cache: NewTokenCache(100_000)},

		CreateActor:     CreateActor{Transactor: t},
		DeactivateActor: DeactivateActor{Transactor: t},
		CreateProduct:   CreateProduct{Transactor: t},
		UpdateProduct:   UpdateProduct{Transactor: t},
		AdjustStock:     AdjustStock{Transactor: t},
		PlaceOrder:      PlaceOrder{Transactor: t},
		CancelOrder:     CancelOrder{Transactor: t},
		ShipOrder:       ShipOrder{Transactor: t},
		RecordPayment:   RecordPayment{Transactor: t},
		RecordRefund:    RecordRefund{Transactor: t},

		GetProduct:   GetProduct{Reader: r},
		ListProducts: ListProducts{Reader: r},
		GetStock:     GetStock{Reader: r},
		ListStock:    ListStock{Reader: r},
		GetOrder:     GetOrder{Reader: r},
		ListOrders:   ListOrders{Reader: r},
	}
}
