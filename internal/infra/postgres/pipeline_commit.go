package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

// The end of a piped transaction: the writes that go out with COMMIT, the
// reads that go out ahead of BEGIN, COMMIT and ROLLBACK.

// FAST PATH (docs/fast-path.md #1, #8): writes sent with COMMIT.
//
// AtCommit implements Conn: in a transaction, call is queued to go out
// with COMMIT (see Batch); outside one it runs now.
func (t *pipe) AtCommit(call func(db dbsqlc.DBTX) error) error {
	if !t.inTx() {
		return call(t)
	}
	t.deferred.Add(call)
	return nil
}

// FAST PATH (docs/fast-path.md #12): a read ahead of the transaction.
//
// Ahead implements Conn. The read sees what was committed before it, like
// a read outside any transaction: it suits a record that no transaction
// changes once committed (a completed idempotency record). A use case that
// answers from it sends nothing else: commit then has no transaction to
// end, and the request took one round trip.
func (t *pipe) Ahead(ctx context.Context, call func(db dbsqlc.DBTX) error) (bool, error) {
	if t.begin == "" || t.deferred.Len() > 0 {
		return false, nil
	}
	begin := t.begin
	t.begin = "" // SendBatch then sends the guards and the check, not BEGIN
	defer func() { t.begin = begin }()
	var b Batch
	b.Add(call)
	return true, b.Send(ctx, t)
}

// commit sends the deferred statements and COMMIT in one round trip. A
// request's pending token check goes with them (SendBatch), so a refused
// check fails the commit; a transaction that sent nothing still sends the
// check, with BEGIN and COMMIT, rather than answer on the cache's word.
func (t *pipe) commit(ctx context.Context) (err error) {
	if t.begin != "" && t.deferred.Len() == 0 && !t.auth.Pending() {
		return nil // nothing was ever sent and nothing is to be checked: there is no transaction
	}
	if t.syncRep != nil {
		// A cancelled wait for a synchronous standby comes back as a
		// successful COMMIT with a warning (syncrep.go).
		check := t.syncRep.check(t.pg)
		defer func() { err = firstErr(err, check()) }()
	}
	b := t.deferred
	t.deferred = Batch{}
	var tag pgconn.CommandTag
	b.Add(func(db dbsqlc.DBTX) (err error) {
		tag, err = db.Exec(ctx, "commit")
		return err
	})
	if err := b.Send(ctx, t); err != nil {
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
