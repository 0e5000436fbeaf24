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
// Reader and, optionally, one KeyLatch (Deps). Each use case is a method
// named after it, in the use case's own file (PlaceOrder in
// place_order.go): it builds the use case from the Deps it needs, so a
// new use case is wired where it is written and this file is not edited.
// Authenticate alone is a field: its token cache is built once, by New,
// and shared by every request.
type UseCases struct {
	Authenticate Authenticate

	deps Deps
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

// New wires the use cases to d: the commands and the token check to
// d.Transactor (the commands with d.Latch), the queries to d.Reader.
func New(d Deps) UseCases {
	return UseCases{Authenticate: Authenticate{Transactor: d.Transactor, Cache: NewTokenCache(100_000)}, deps: d}
}
