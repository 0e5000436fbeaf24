package postgres

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

// FAST PATH (docs/fast-path.md #3, #4): several generated calls in one
// round trip.
//
// Batch sends several generated sqlc calls in one pgx.Batch: one network
// round trip. The generated methods supply everything, as they do when
// called on their own: the SQL text, the arguments in their order, and the
// scan of each result into the generated row type. Nothing here writes
// SQL or lists columns, so a column added to a query changes the batched
// call and the single call alike (ADR 0014).
//
// A generated method does two things: it sends its statement, then reads
// its result. A batch needs them apart, so each call (a function of the
// dbsqlc.DBTX it runs on) runs twice:
//
//   - Add runs it on a DBTX that queues the statement into the batch and
//     answers errQueued instead of a result: the generated method returns
//     errQueued before looking at any row;
//   - Send sends the batch, then runs every call again, in order, on a DBTX
//     that hands it the next result of the batch: the generated method
//     scans its own row, and the call keeps what it needs.
//
// So a call must make exactly one generated call and return its error
// unless nil (it may look at the result after that check, which the first
// run never passes), and it must pass the same arguments both times:
// compute them before the call, not inside it (an id minted, a map walked
// or a clock read inside the call differs between the runs, and the
// caller would keep values other than those written). The second run
// checks its SQL and its arguments against the first's and fails the batch
// with an error when they differ. Reading stops at the first call that
// returns an error: Send returns it, and the statements after it are
// discarded unread, as when the server skipped them.
type Batch struct {
	pgx.Batch
	reads []func(dbsqlc.DBTX) error
	err   error // a call that did not queue exactly one statement
}

// errQueued is what the queueing DBTX answers in place of a result.
var errQueued = errors.New("statement queued, its result comes with the batch")

// Add queues the statement of call's generated method.
func (b *Batch) Add(call func(db dbsqlc.DBTX) error) {
	n := b.Len()
	if err := call(queuer{&b.Batch}); !errors.Is(err, errQueued) || b.Len() != n+1 {
		b.err = firstErr(b.err, fmt.Errorf("batch: call %d queued %d statements (error %v), want one", len(b.reads)+1, b.Len()-n, err))
	}
	b.reads = append(b.reads, call)
}

// FAST PATH (docs/fast-path.md #6): the token check queued in band.
//
// AddAuthCheck queues the request's token check at this point of the batch
// (nothing for a nil check): check is the connection's (Conn.AuthCheck),
// and the batch then goes out on Conn.WithoutAuthCheck. A check that had
// passed is made pending again first, so that if the batch fails before the
// check runs (a wait ran out), the request confirms before it answers.
func (b *Batch) AddAuthCheck(ctx context.Context, check *app.AuthCheck) {
	if check == nil || check.Refused() {
		return
	}
	check.Recheck()
	b.Add(func(db dbsqlc.DBTX) error { return settle(ctx, db, check) })
}

// AuthCheck implements Conn.
func (t *pipe) AuthCheck() *app.AuthCheck { return t.auth }

// WithoutAuthCheck implements Conn.
func (t *pipe) WithoutAuthCheck() DB { return uncheckedPipe{t} }

// uncheckedPipe is a pipe that sends nothing of its token check
// (Conn.WithoutAuthCheck): a batch that queued the check (AddAuthCheck)
// goes out on it.
type uncheckedPipe struct{ t *pipe }

var _ DB = uncheckedPipe{}

func (u uncheckedPipe) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return u.t.send(ctx, b, nil)
}

func (u uncheckedPipe) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return u.t.exec(ctx, nil, sql, args...)
}

func (u uncheckedPipe) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return u.t.query(ctx, nil, sql, args...)
}

func (u uncheckedPipe) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return u.t.queryRow(ctx, nil, sql, args...)
}

// Send sends the batch on db and reads every result through its call.
func (b *Batch) Send(ctx context.Context, db DB) error {
	if b.err != nil {
		return b.err
	}
	br := db.SendBatch(ctx, &b.Batch)
	return firstErr(b.read(br), br.Close())
}

// read runs the calls on the results of br, in order, and stops at the
// first error.
func (b *Batch) read(br pgx.BatchResults) error {
	for i, call := range b.reads {
		q := b.QueuedQueries[i]
		if err := call(&batchResult{br: br, call: i + 1, sql: q.SQL, args: q.Arguments}); err != nil {
			return err
		}
	}
	return nil
}

// queuer is the DBTX of a call's first run: it queues the statement and
// answers errQueued.
type queuer struct{ b *pgx.Batch }

func (q queuer) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	q.b.Queue(sql, args...)
	return pgconn.CommandTag{}, errQueued
}

func (q queuer) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	q.b.Queue(sql, args...)
	return errRows{err: errQueued}, errQueued
}

func (q queuer) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	q.b.Queue(sql, args...)
	return errRows{err: errQueued}
}

// batchResult is the DBTX of a call's second run: it hands the call the result
// of the statement that the first run queued. The SQL must be the same
// text with the same arguments, and come once: a call whose statement
// depends on something other than its inputs is a bug, reported here
// rather than by a misread result or a value kept that is not the one
// written.
type batchResult struct {
	br   pgx.BatchResults
	call int // 1-based, for the error
	sql  string
	args []any
	used bool
}

// ErrBatchArguments: a batched call passed other arguments when it read its
// result than when it queued its statement (see Batch).
var ErrBatchArguments = errors.New("batch: a call's second run passed other arguments than its first")

func (r *batchResult) take(sql string, args []any) error {
	if r.used || sql != r.sql {
		return fmt.Errorf("batch: a call read a result other than its queued statement's (%.40q)", r.sql)
	}
	r.used = true
	if !reflect.DeepEqual(args, r.args) {
		// The values are left out: they may be a token's hash or a payload.
		return fmt.Errorf("%w: call %d (%.40q)", ErrBatchArguments, r.call, r.sql)
	}
	return nil
}

func (r *batchResult) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := r.take(sql, args); err != nil {
		return pgconn.CommandTag{}, err
	}
	return r.br.Exec()
}

func (r *batchResult) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := r.take(sql, args); err != nil {
		return errRows{err: err}, err
	}
	return r.br.Query()
}

func (r *batchResult) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	if err := r.take(sql, args); err != nil {
		return errRows{err: err}
	}
	return r.br.QueryRow()
}
