package testkit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ordersvc/ordersvc/internal/infra/postgres"
)

// Where a stop holds a connection, relative to its statement.
type Where int

const (
	// Before holds the connection before the statement (or the batch that
	// carries it) is sent: nothing of it has run yet.
	Before Where = iota + 1
	// After holds the connection once the statement's result has come
	// back: its locks are held and its transaction is still open.
	After
)

func (w Where) String() string {
	if w == Before {
		return "before"
	}
	return "after"
}

// Hooks is a pgx tracer installed on the pool of every Env. A test arms a
// Stop at a named statement, and every connection of the service that
// reaches it is held there until the test releases it. This is how a race
// test forces its interleaving in the production code path itself (the
// pipelined placement included) instead of hoping for it: for example, hold
// the first transaction after it locked a row until the others are waiting
// on that lock (Env.Interleave).
//
// A statement is named by its sqlc name (the "-- name: X" line that sqlc puts
// at the top of every query, e.g. "StockLockRows"), or, for a
// statement without one, by its first word in lower case ("commit"). A test's
// naive SQL can carry a "-- name:" line of its own to be stopped at.
type Hooks struct {
	mu    sync.Mutex
	stops []*Stop
	// trips, while recording, holds what each round trip sent.
	trips     [][]string
	recording bool
}

var (
	_ pgx.QueryTracer = (*Hooks)(nil)
	_ pgx.BatchTracer = (*Hooks)(nil)
)

// Stop arms a stop where (before or after) the statement named statement. It
// holds every connection that reaches it until Release.
func (h *Hooks) Stop(where Where, statement string) *Stop { return h.StopFirst(where, statement, 0) }

// StopFirst is Stop for the first n connections that reach the statement;
// later ones pass. n = 0 holds every one.
func (h *Hooks) StopFirst(where Where, statement string, n int) *Stop {
	s := &Stop{h: h, where: where, name: statement, limit: n,
		arrived: make(chan struct{}), release: make(chan struct{}), changed: make(chan struct{}, 1)}
	h.mu.Lock()
	h.stops = append(h.stops, s)
	h.mu.Unlock()
	return s
}

// ReleaseAll releases every armed stop (at the end of a test).
func (h *Hooks) ReleaseAll() {
	h.mu.Lock()
	stops := append([]*Stop(nil), h.stops...)
	h.mu.Unlock()
	for _, s := range stops {
		s.Release()
	}
}

func (h *Hooks) reach(where Where, names ...string) {
	h.mu.Lock()
	if len(h.stops) == 0 {
		h.mu.Unlock()
		return
	}
	var stop *Stop
	for _, s := range h.stops {
		if s.where != where {
			continue
		}
		for _, n := range names {
			if n == s.name {
				stop = s
			}
		}
		if stop != nil {
			break
		}
	}
	h.mu.Unlock()
	if stop != nil {
		stop.hold()
	}
}

func (h *Hooks) remove(s *Stop) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, x := range h.stops {
		if x == s {
			h.stops = append(h.stops[:i], h.stops[i+1:]...)
			return
		}
	}
}

type nameKey struct{}

// Record starts recording the round trips of every connection of the
// service and returns the function that stops it and returns them, each the
// names of the statements it sent, in order: one statement sent on its own,
// or a whole batch. Tests use it to pin down how many round trips an
// operation costs and what rides in each.
func (h *Hooks) Record() (stop func() [][]string) {
	h.mu.Lock()
	h.trips, h.recording = nil, true
	h.mu.Unlock()
	return func() [][]string {
		h.mu.Lock()
		defer h.mu.Unlock()
		trips := h.trips
		h.trips, h.recording = nil, false
		return trips
	}
}

func (h *Hooks) record(names []string) {
	h.mu.Lock()
	if h.recording {
		h.trips = append(h.trips, names)
	}
	h.mu.Unlock()
}

// TraceQueryStart stops before a statement sent on its own.
func (h *Hooks) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	name := postgres.StatementName(data.SQL)
	h.record([]string{name})
	h.reach(Before, name)
	return context.WithValue(ctx, nameKey{}, name)
}

// TraceQueryEnd stops after a statement sent on its own succeeded.
func (h *Hooks) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	if name, ok := ctx.Value(nameKey{}).(string); ok && data.Err == nil {
		h.reach(After, name)
	}
}

// TraceBatchStart stops before a batch that carries the statement is sent.
func (h *Hooks) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	names := make([]string, 0, len(data.Batch.QueuedQueries))
	for _, q := range data.Batch.QueuedQueries {
		names = append(names, postgres.StatementName(q.SQL))
	}
	h.record(names)
	h.reach(Before, names...)
	return ctx
}

// TraceBatchQuery stops after a batched statement's result was read.
func (h *Hooks) TraceBatchQuery(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	if data.Err == nil {
		h.reach(After, postgres.StatementName(data.SQL))
	}
}

// TraceBatchEnd does nothing.
func (h *Hooks) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// Stop holds the connections that reach a statement until it is released.
// After Release it is disarmed: later arrivals pass.
type Stop struct {
	h     *Hooks
	where Where
	name  string
	limit int

	mu       sync.Mutex
	held     int
	released bool
	arrived  chan struct{} // closed at the first arrival
	release  chan struct{}
	changed  chan struct{} // a token whenever held changes
}

func (s *Stop) String() string { return fmt.Sprintf("%s %s", s.where, s.name) }

func (s *Stop) hold() {
	s.mu.Lock()
	if s.released || (s.limit > 0 && s.held >= s.limit) {
		s.mu.Unlock()
		return
	}
	s.held++
	if s.held == 1 {
		close(s.arrived)
	}
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
	<-s.release
}

// Held is how many connections have been held so far.
func (s *Stop) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// Arrived is closed when the first connection is held.
func (s *Stop) Arrived() <-chan struct{} { return s.arrived }

// Release lets every held connection go on and disarms the stop.
func (s *Stop) Release() {
	s.mu.Lock()
	if !s.released {
		s.released = true
		close(s.release)
	}
	s.mu.Unlock()
	s.h.remove(s)
}

// WaitArrived waits until a connection is held at s, and fails the test if
// none is within timeout.
func (s *Stop) WaitArrived(t interface {
	Helper()
	Fatalf(string, ...any)
}, timeout time.Duration) {
	t.Helper()
	select {
	case <-s.arrived:
	case <-time.After(timeout):
		s.Release()
		t.Fatalf("no connection reached the stop %s within %s", s, timeout)
	}
}
