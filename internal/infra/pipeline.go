package infra

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

// dbtx is what the repositories run on. It can send a pgx.Batch: several
// statements in one network round trip.
type dbtx interface {
	dbsqlc.DBTX
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

var (
	_ dbtx = (*pgxpool.Pool)(nil)
	_ dbtx = (*pgxpool.Conn)(nil)
	_ dbtx = (*pipe)(nil)
)

// pipe is where a use case's statements go: one transaction on a pooled
// connection (Runner.InTx) or the pool itself (Runner.Read). It saves the
// round trips that bookkeeping statements would cost on their own:
//   - BEGIN is not sent alone: it goes out with the transaction's first
//     statement or batch, and so do the pool's guard timeouts (GuardsSet,
//     local to the transaction); outside a transaction the guards go in
//     front of every statement, in the implicit transaction that a
//     pipeline up to its Sync is;
//   - the request's pending token check (app.AuthCheck) goes out in front of
//     its first statement, and a refused check fails that statement;
//   - on a replica, the replay position that proves the read current goes
//     out in front of its first statement (replicaFence);
//   - statements queued with atCommit go out with COMMIT.
//
// The server runs exactly the statements it would otherwise, in the same
// order; only the network exchanges are fewer. A batch stops at its first
// error (the server skips the rest up to the Sync), so a failure anywhere
// still aborts the whole transaction.
type pipe struct {
	db dbtx
	// begin is the BEGIN statement of a transaction while it is unsent.
	begin string
	// begun is set once BEGIN went out: a failure then needs a ROLLBACK.
	begun bool
	// guards, when not nil, go out with BEGIN, or in front of each
	// statement outside a transaction.
	guards *guards
	// deferred are sent with COMMIT, in order; their errors fail the commit.
	deferred batch
	// fence, when not nil, makes the pipe a replica read's (ReplicaReader):
	// the replica's replay position goes out in front of the first
	// statement, and a replica behind the fence fails it. Such a pipe never
	// carries the request's token check: a replica may not have the
	// deactivation yet.
	fence *replicaFence
}

// queries runs the generated statements (dbsqlc.Queries holds no state).
var queries = dbsqlc.New()

func newTxPipe(conn *pgxpool.Conn, g *guards, opts pgx.TxOptions) *pipe {
	begin := "begin isolation level read committed"
	if opts.IsoLevel == pgx.Serializable {
		begin = "begin isolation level serializable"
	}
	return &pipe{db: conn, begin: begin, guards: g}
}

// newPoolPipe runs each statement on its own on the pool, with the pool's
// guards.
func newPoolPipe(pool *pgxpool.Pool) *pipe {
	return &pipe{db: pool, guards: poolGuards(pool)}
}

// inTx says whether the pipe is a transaction.
func (t *pipe) inTx() bool { return t.begin != "" || t.begun }

// SendBatch sends b, preceded by what must go first (BEGIN, the guards,
// the token check) in the same round trip. The results the caller reads
// are b's own.
func (t *pipe) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	check := t.authCheck(ctx)
	began := t.begin != ""
	guarded := t.guards != nil && (began || !t.begun)
	fenced := t.fence != nil && !t.fence.sent
	if !began && !guarded && check == nil && !fenced {
		return t.db.SendBatch(ctx, b)
	}
	var first batch
	if began {
		begin := t.begin
		first.add(func(db dbsqlc.DBTX) error {
			_, err := db.Exec(ctx, begin)
			return err
		})
		t.begin, t.begun = "", true
	}
	if guarded {
		first.add(func(db dbsqlc.DBTX) error { return ownSetting(queries.GuardsSet(ctx, db, t.guards.params)) })
	}
	if check != nil {
		first.add(func(db dbsqlc.DBTX) error { return settle(ctx, db, check) })
	}
	if fenced {
		t.fence.sent = true
		first.add(func(db dbsqlc.DBTX) error { return t.fence.check(ctx, db) })
	}
	br := t.db.SendBatch(ctx, &pgx.Batch{QueuedQueries: append(first.QueuedQueries, b.QueuedQueries...)})
	// A failed BEGIN fails every later read too: pgx keeps the error and
	// answers every read and Close with it.
	if err := firstErr(first.err, first.read(br)); err != nil {
		return failedBatch{br: br, err: err}
	}
	return br
}

// settle runs the token lookup of the request's check (ActorByTokenHash)
// and settles the check with it.
func settle(ctx context.Context, db dbsqlc.DBTX, check *app.AuthCheck) error {
	row, err := queries.ActorByTokenHash(ctx, db, check.TokenHash())
	if isNoRows(err) {
		return check.Settle(app.Principal{}, false)
	}
	if err != nil {
		return err // the database did not answer; the check stays pending
	}
	role, err := domain.ParseRole(row.Role)
	if err != nil {
		return err
	}
	return check.Settle(app.Principal{ID: row.ID, Role: role, Active: row.Active}, true)
}

// authCheck is the token check to send in front of the next statement:
// the request's pending one, never on a replica.
func (t *pipe) authCheck(ctx context.Context) *app.AuthCheck {
	if t.fence != nil {
		return nil
	}
	return app.PendingAuthCheck(ctx)
}

func (t *pipe) direct(ctx context.Context) bool {
	return t.begin == "" && (t.guards == nil || t.begun) && t.authCheck(ctx) == nil && (t.fence == nil || t.fence.sent)
}

func (t *pipe) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.direct(ctx) {
		return t.db.Exec(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.SendBatch(ctx, b)
	tag, err := br.Exec()
	return tag, firstErr(err, br.Close())
}

func (t *pipe) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.direct(ctx) {
		return t.db.Query(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.SendBatch(ctx, b)
	rows, err := br.Query()
	if err != nil {
		return rows, firstErr(err, br.Close())
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (t *pipe) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.direct(ctx) {
		return t.db.QueryRow(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	return batchRow{br: t.SendBatch(ctx, b)}
}

// atCommit queues a generated call whose only result is its error, to be
// sent with COMMIT (see batch). Only a transaction has one.
func (t *pipe) atCommit(call func(db dbsqlc.DBTX) error) {
	t.deferred.add(call)
}

// commit sends the deferred statements and COMMIT in one round trip. A
// request's pending token check goes with them (SendBatch), so a refused
// check fails the commit; a transaction that sent nothing still sends the
// check, with BEGIN and COMMIT, rather than answer on the cache's word.
func (t *pipe) commit(ctx context.Context) (err error) {
	if t.begin != "" && t.deferred.Len() == 0 && app.PendingAuthCheck(ctx) == nil {
		return nil // nothing was ever sent and nothing is to be checked: there is no transaction
	}
	if conn, ok := t.db.(*pgxpool.Conn); ok {
		// A cancelled wait for a synchronous standby comes back as a
		// successful COMMIT with a warning (syncrep.go).
		check := syncRepCheck(conn)
		defer func() { err = firstErr(err, check()) }()
	}
	b := t.deferred
	t.deferred = batch{}
	var tag pgconn.CommandTag
	b.add(func(db dbsqlc.DBTX) (err error) {
		tag, err = db.Exec(ctx, "commit")
		return err
	})
	if err := b.send(ctx, t); err != nil {
		return err
	}
	if tag.String() == "ROLLBACK" {
		// The transaction had failed before and the failure was ignored.
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// rollback ends a transaction that failed. A connection left broken or
// inside a transaction is destroyed by the pool on release, never reused.
func (t *pipe) rollback(ctx context.Context) {
	if t.begun {
		_, _ = t.db.Exec(ctx, "rollback")
	}
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// batchRow is the row of a one-statement batch; Scan also closes the batch.
type batchRow struct{ br pgx.BatchResults }

func (r batchRow) Scan(dest ...any) error {
	err := r.br.QueryRow().Scan(dest...)
	return firstErr(err, r.br.Close())
}

// batchRows are the rows of a one-statement batch; Close also closes it.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

func (r *batchRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.err = r.br.Close()
}

func (r *batchRows) Err() error {
	return firstErr(r.Rows.Err(), r.err)
}

// failedBatch answers every read with the error that stopped the request
// (its token check was refused) and closes the results underneath.
type failedBatch struct {
	br  pgx.BatchResults
	err error
}

func (f failedBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, f.err }
func (f failedBatch) Query() (pgx.Rows, error)         { return errRows{err: f.err}, f.err }
func (f failedBatch) QueryRow() pgx.Row                { return errRows{err: f.err} }
func (f failedBatch) Tx() pgx.Tx                       { return nil }
func (f failedBatch) Close() error {
	_ = f.br.Close()
	return f.err
}

// errRows is a closed, empty result that carries an error.
type errRows struct{ err error }

func (r errRows) Close()                                       {}
func (r errRows) Err() error                                   { return r.err }
func (r errRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (r errRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (r errRows) Next() bool                                   { return false }
func (r errRows) Scan(...any) error                            { return r.err }
func (r errRows) Values() ([]any, error)                       { return nil, r.err }
func (r errRows) RawValues() [][]byte                          { return nil }
func (r errRows) Conn() *pgx.Conn                              { return nil }
func (r errRows) TypeMap() *pgtype.Map                         { return nil }
