package infra

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

// dbtx is what the repositories run on: a transaction or the pool. Both can
// send a pgx.Batch, several statements in one network round trip.
type dbtx interface {
	dbsqlc.DBTX
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// pipeTx is one transaction on a pooled connection that saves the round
// trips a pgx.Tx spends on its own: BEGIN is not sent alone but goes out with
// the transaction's first statement or batch, and statements queued with
// atCommit go out with COMMIT. The server runs exactly the same statements in
// the same order as with a pgx.Tx; only the network exchanges are fewer.
// A batch stops at its first error (the server skips the rest up to the
// Sync), so a failure anywhere still aborts the whole transaction.
type pipeTx struct {
	conn *pgxpool.Conn
	// begin is the BEGIN statement while it has not been sent.
	begin string
	// begun is set once BEGIN went out: a failure then needs a ROLLBACK.
	begun bool
	// deferred are sent with COMMIT, in order; their errors fail the commit.
	deferred []*pgx.QueuedQuery
}

func newPipeTx(conn *pgxpool.Conn, opts pgx.TxOptions) *pipeTx {
	begin := "begin isolation level read committed"
	if opts.IsoLevel == pgx.Serializable {
		begin = "begin isolation level serializable"
	}
	return &pipeTx{conn: conn, begin: begin}
}

var _ dbtx = (*pipeTx)(nil)

// SendBatch sends b, preceded by BEGIN when the transaction has not begun.
// The results the caller reads are b's own.
func (t *pipeTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.begin == "" {
		return t.conn.SendBatch(ctx, b)
	}
	qs := make([]*pgx.QueuedQuery, 0, len(b.QueuedQueries)+1)
	qs = append(qs, &pgx.QueuedQuery{SQL: t.begin})
	t.begin, t.begun = "", true
	br := t.conn.SendBatch(ctx, &pgx.Batch{QueuedQueries: append(qs, b.QueuedQueries...)})
	// Read BEGIN's result here. If it failed, pgx keeps the error and
	// answers every later read and Close with it.
	_, _ = br.Exec()
	return br
}

func (t *pipeTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.begin == "" {
		return t.conn.Exec(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.SendBatch(ctx, b)
	tag, err := br.Exec()
	return tag, firstErr(err, br.Close())
}

func (t *pipeTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.begin == "" {
		return t.conn.Query(ctx, sql, args...)
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

func (t *pipeTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.begin == "" {
		return t.conn.QueryRow(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	return batchRow{br: t.SendBatch(ctx, b)}
}

// atCommit queues a statement whose only result is its error, to be sent
// with COMMIT.
func (t *pipeTx) atCommit(sql string, args ...any) {
	t.deferred = append(t.deferred, &pgx.QueuedQuery{SQL: sql, Arguments: args})
}

// errCommitRolledBack: COMMIT answered ROLLBACK because the transaction had
// already failed.
var errCommitRolledBack = pgx.ErrTxCommitRollback

// commit sends the deferred statements and COMMIT in one round trip.
func (t *pipeTx) commit(ctx context.Context) error {
	if t.begin != "" && len(t.deferred) == 0 {
		return nil // nothing was ever sent: there is no transaction
	}
	b := &pgx.Batch{QueuedQueries: append(t.deferred, &pgx.QueuedQuery{SQL: "commit"})}
	t.deferred = nil
	br := t.SendBatch(ctx, b)
	for range len(b.QueuedQueries) - 1 {
		if _, err := br.Exec(); err != nil {
			return firstErr(err, br.Close())
		}
	}
	tag, err := br.Exec()
	if err = firstErr(err, br.Close()); err != nil {
		return err
	}
	if tag.String() == "ROLLBACK" {
		return errCommitRolledBack
	}
	return nil
}

// rollback ends a transaction that failed. A connection left broken or
// inside a transaction is destroyed by the pool on release, never reused.
func (t *pipeTx) rollback(ctx context.Context) {
	if t.begun {
		_, _ = t.conn.Exec(ctx, "rollback")
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
