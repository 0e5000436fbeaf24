package postgres

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgconn"
)

// A COMMIT on a primary with synchronous replication waits until a standby
// has the transaction's WAL. When that wait is cancelled (a cancel request,
// or pg_cancel_backend from an operator or a monitoring job; not
// statement_timeout, which COMMIT's wait escapes), PostgreSQL does
// not fail the COMMIT: it returns success with the WARNING "canceling wait
// for synchronous replication due to user request", detail "The transaction
// has already committed locally, but might not have been replicated to the
// standby." Taken as success, that is an acknowledged order that a failover
// loses. The pool's notice handler marks the connection, and the commit
// that sees the mark answers errSyncRepCancelled instead: the outcome is
// ambiguous (503, retry with the same key), as for a COMMIT whose answer
// was lost (docs/ha.md).

// syncRepWatch is a pool's watch, owned by its Pool value.
type syncRepWatch struct {
	// on says whether the notice handler marks connections (always,
	// except in the naive variant a test must catch).
	on atomic.Bool
	// cancelled holds the pool's connections that received that warning
	// since their last COMMIT was sent.
	cancelled sync.Map // *pgconn.PgConn → struct{}
}

func newSyncRepWatch() *syncRepWatch {
	w := &syncRepWatch{}
	w.on.Store(true)
	return w
}

// errSyncRepCancelled is a COMMIT that PostgreSQL applied locally while no
// synchronous standby confirmed it.
var errSyncRepCancelled = errSyncRep{}

type errSyncRep struct{}

func (errSyncRep) Error() string {
	return "commit applied on the primary but not confirmed by a synchronous standby (wait cancelled)"
}

// noticeHandler returns the pool's notice handler: it marks a
// connection that receives the warning of a cancelled wait for synchronous
// replication, while w.on holds true, and passes every notice on to next.
func (w *syncRepWatch) noticeHandler(next pgconn.NoticeHandler) pgconn.NoticeHandler {
	return func(c *pgconn.PgConn, n *pgconn.Notice) {
		if w.on.Load() && strings.EqualFold(n.Severity, "WARNING") && strings.Contains(n.Message, "synchronous replication") {
			w.cancelled.Store(c, struct{}{})
		}
		if next != nil {
			next(c, n)
		}
	}
}

// check clears pg's mark and returns the check that a commit on pg runs
// once COMMIT has returned, whatever it returned: errSyncRepCancelled when
// the warning arrived meanwhile.
func (w *syncRepWatch) check(pg *pgconn.PgConn) func() error {
	w.cancelled.Delete(pg)
	return func() error {
		if _, hit := w.cancelled.LoadAndDelete(pg); hit {
			return errSyncRepCancelled
		}
		return nil
	}
}
