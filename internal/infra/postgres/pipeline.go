package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

// DB is what statements run on: a generated method's DBTX that can also
// send a pgx.Batch, several statements in one network round trip.
type DB interface {
	dbsqlc.DBTX
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Conn is what the repositories are bound to: a transaction (Runner.InTx)
// or the pool (Pool.Conn), which can also defer a write to COMMIT. It
// carries the request's token check it was opened with, and sends it in
// front of its next statement while it is pending.
type Conn interface {
	DB
	// AuthCheck is the request's token check the connection carries, nil
	// for none: for a batch that queues it at a place of its own
	// (Batch.AddAuthCheck).
	AuthCheck() *app.AuthCheck
	// WithoutAuthCheck is the same connection (the same transaction) with
	// nothing of the token check in front of its statements: it sends the
	// batch that queued the check itself.
	WithoutAuthCheck() DB
	// AtCommit sends call's statement with COMMIT, in the same round trip,
	// when the connection is a transaction: its error then fails the
	// commit. Outside a transaction it runs call at once and returns its
	// error. call makes one generated call whose only result is its error
	// (see Batch).
	AtCommit(call func(db dbsqlc.DBTX) error) error
	// Ahead runs call's statement ahead of the transaction, while the
	// transaction has sent nothing: on its connection, in the implicit
	// transaction of one round trip of its own, with the guards and the
	// request's pending token check in front; BEGIN still goes out with
	// the next statement. It reports false and runs nothing once the
	// transaction has begun, or outside a transaction. call makes one
	// generated call (see Batch).
	Ahead(ctx context.Context, call func(db dbsqlc.DBTX) error) (bool, error)
}

var (
	_ DB   = (*pgxpool.Pool)(nil)
	_ DB   = (*pgxpool.Conn)(nil)
	_ Conn = (*pipe)(nil)
)

// FAST PATH (docs/fast-path.md #1, #2): BEGIN with the first statement,
// the guards in front of it, deferred writes with COMMIT.
//
// pipe is where a use case's statements go: one transaction on a pooled
// connection (Runner.InTx) or the pool itself (Pool.Conn). It saves the
// round trips that bookkeeping statements would cost on their own:
//   - BEGIN is not sent alone: it goes out with the transaction's first
//     statement or batch, and so do the pool's guard timeouts (GuardsSet,
//     local to the transaction); outside a transaction the guards go in
//     front of every statement, in the implicit transaction that a
//     pipeline up to its Sync is;
//   - the request's pending token check (app.AuthCheck), which the pipe
//     is opened with, goes out in front of its first statement, and a
//     refused check fails that statement;
//   - on a replica, the replay position that proves the read current goes
//     out in front of its first statement (replicaFence);
//   - statements queued with AtCommit go out with COMMIT.
//
// The server runs exactly the statements it would otherwise, in the same
// order; only the network exchanges are fewer. A batch stops at its first
// error (the server skips the rest up to the Sync), so a failure anywhere
// still aborts the whole transaction.
type pipe struct {
	db DB
	// begin is the BEGIN statement of a transaction while it is unsent.
	begin string
	// begun is set once BEGIN went out: a failure then needs a ROLLBACK.
	begun bool
	// guards, when not nil, go out with BEGIN, or in front of each
	// statement outside a transaction.
	guards *guards
	// deferred are sent with COMMIT, in order; their errors fail the commit.
	deferred Batch
	// syncRep and pg, on a transaction of a Pool that watches them, turn a
	// COMMIT whose wait for a synchronous standby was cancelled into
	// errSyncRepCancelled (syncrep.go).
	syncRep *syncRepWatch
	pg      *pgconn.PgConn
	// auth is the request's token check, nil for none: sent in front of
	// the next statement while it is pending.
	auth *app.AuthCheck
	// fence, when not nil, makes the pipe a replica read's (ReplicaReader):
	// the replica's replay position goes out in front of the first
	// statement, and a replica behind the fence fails it. Such a pipe never
	// carries the request's token check (auth is nil): a replica may not
	// have the deactivation yet.
	fence *replicaFence
}

// queries runs the generated statements (dbsqlc.Queries holds no state).
var queries = dbsqlc.New()

func newTxPipe(conn *pgxpool.Conn, pool *Pool, opts pgx.TxOptions, auth *app.AuthCheck) *pipe {
	begin := "begin isolation level read committed"
	if opts.IsoLevel == pgx.Serializable {
		begin = "begin isolation level serializable"
	}
	t := &pipe{db: conn, begin: begin, guards: pool.guards, auth: auth}
	if pool.syncRep != nil {
		t.syncRep, t.pg = pool.syncRep, conn.Conn().PgConn()
	}
	return t
}

// newPoolPipe runs each statement on its own on the pool, with the pool's
// guards and the token check auth (nil for none).
func newPoolPipe(pool *Pool, auth *app.AuthCheck) *pipe {
	return &pipe{db: pool.Pool, guards: pool.guards, auth: auth}
}

// inTx says whether the pipe is a transaction.
func (t *pipe) inTx() bool { return t.begin != "" || t.begun }

// SendBatch sends b, preceded by what must go first (BEGIN, the guards,
// the token check) in the same round trip. The results the caller reads
// are b's own.
func (t *pipe) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.send(ctx, b, t.pendingCheck())
}

// send is SendBatch with check, when not nil, as the token check to send.
func (t *pipe) send(ctx context.Context, b *pgx.Batch, check *app.AuthCheck) pgx.BatchResults {
	began := t.begin != ""
	guarded := t.guards != nil && (began || !t.begun)
	fenced := t.fence != nil && !t.fence.sent
	if !began && !guarded && check == nil && !fenced {
		return t.db.SendBatch(ctx, b)
	}
	var first Batch
	if began {
		begin := t.begin
		first.Add(func(db dbsqlc.DBTX) error {
			_, err := db.Exec(ctx, begin)
			return err
		})
		t.begin, t.begun = "", true
	}
	if guarded {
		first.Add(func(db dbsqlc.DBTX) error { return OwnSetting(queries.GuardsSet(ctx, db, t.guards.params)) })
	}
	if check != nil {
		first.Add(func(db dbsqlc.DBTX) error { return settle(ctx, db, check) })
	}
	if fenced {
		t.fence.sent = true
		first.Add(func(db dbsqlc.DBTX) error { return t.fence.check(ctx, db) })
	}
	br := t.db.SendBatch(ctx, &pgx.Batch{QueuedQueries: append(first.QueuedQueries, b.QueuedQueries...)})
	// A failed BEGIN fails every later read too: pgx keeps the error and
	// answers every read and Close with it.
	if err := firstErr(first.err, first.read(br)); err != nil {
		return failedBatch{br: br, err: err}
	}
	return br
}

// FAST PATH (docs/fast-path.md #6): the token check in band.
//
// settle runs the token lookup of the request's check (ActorByTokenHash)
// and settles the check with it.
func settle(ctx context.Context, db dbsqlc.DBTX, check *app.AuthCheck) error {
	row, err := queries.ActorByTokenHash(ctx, db, check.TokenHash())
	if IsNoRows(err) {
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

// pendingCheck is the token check to send in front of the next statement:
// the pipe's own while it is pending, else nil.
func (t *pipe) pendingCheck() *app.AuthCheck {
	if t.auth.Pending() {
		return t.auth
	}
	return nil
}

func (t *pipe) direct(check *app.AuthCheck) bool {
	return t.begin == "" && (t.guards == nil || t.begun) && check == nil && (t.fence == nil || t.fence.sent)
}

func (t *pipe) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.exec(ctx, t.pendingCheck(), sql, args...)
}

func (t *pipe) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.query(ctx, t.pendingCheck(), sql, args...)
}

func (t *pipe) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.queryRow(ctx, t.pendingCheck(), sql, args...)
}

func (t *pipe) exec(ctx context.Context, check *app.AuthCheck, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.direct(check) {
		return t.db.Exec(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.send(ctx, b, check)
	tag, err := br.Exec()
	return tag, firstErr(err, br.Close())
}

func (t *pipe) query(ctx context.Context, check *app.AuthCheck, sql string, args ...any) (pgx.Rows, error) {
	if t.direct(check) {
		return t.db.Query(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.send(ctx, b, check)
	rows, err := br.Query()
	if err != nil {
		return rows, firstErr(err, br.Close())
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (t *pipe) queryRow(ctx context.Context, check *app.AuthCheck, sql string, args ...any) pgx.Row {
	if t.direct(check) {
		return t.db.QueryRow(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	return batchRow{br: t.send(ctx, b, check)}
}
