package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
)

// SQLSTATE codes that the service treats specially.
const (
	sqlDataExceptionClass   = "22" // 22001 too long, 22003 out of range, 22021 U+0000 in text, …
	sqlSerializationFailure = "40001"
	sqlDeadlockDetected     = "40P01"
	sqlLockNotAvailable     = "55P03"
	sqlQueryCanceled        = "57014"
	sqlAdminShutdown        = "57P01"
	sqlCrashShutdown        = "57P02"
	sqlCannotConnectNow     = "57P03"
	// sqlReadOnlyTransaction is a write sent to a node that is not (or no
	// longer) the primary: a standby, or a primary demoted by a failover
	// manager such as Patroni, or fenced read-only.
	sqlReadOnlyTransaction = "25006"
)

// Translate maps driver errors to the errors the application switches on, in
// one place, by what PostgreSQL says and never by a table's name: no rows
// becomes not found, a data exception (class 22: a value the database will
// not store) in a statement that carries the caller's values becomes
// domain.ErrValueRejected (never one in the service's own settings, see
// settingError), and an unreachable or
// overloaded database becomes app.ErrUnavailable, and so does a write that
// reached a read-only node (25006) during a failover: the primary is
// elsewhere, or soon will be, so the caller retries, as after a dropped
// connection (docs/ha.md). Everything else passes through unchanged, a
// broken constraint included: what a constraint of the schema means (a
// taken SKU, a CHECK behind a guarded statement) is the store's to say,
// beside the statements of its table (internal/infra/store). The driver's
// error stays in the chain for the log.
func Translate(err error) error {
	if err == nil {
		return nil
	}
	var own settingError
	if errors.As(err, &own) {
		return err // the server's own misconfiguration: an internal error, never the caller's
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.ErrNotFound
	}
	if errors.Is(err, errSyncRepCancelled) {
		// Committed on the primary, not known to any standby: ambiguous,
		// like a COMMIT whose answer was lost.
		return errors.Join(app.ErrUnavailable, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return translateServerError(pgErr, err)
	}
	if isConnError(err) {
		return errors.Join(app.ErrUnavailable, err)
	}
	return err
}

// translateServerError is Translate for an error the server sent.
func translateServerError(pgErr *pgconn.PgError, err error) error {
	switch {
	case strings.HasPrefix(pgErr.Code, sqlDataExceptionClass):
		// The domain's rules should have refused the value; this is the
		// backstop that keeps a rule it lacks from becoming a 500.
		return errors.Join(domain.ErrValueRejected, err)
	case strings.HasPrefix(pgErr.Code, "08"):
		// Connection exceptions, such as PgBouncer's "server login has
		// been failing, try again later" (08P01) while PostgreSQL is down.
		return errors.Join(app.ErrUnavailable, err)
	}
	switch pgErr.Code {
	case sqlLockNotAvailable, sqlQueryCanceled, sqlAdminShutdown, sqlCrashShutdown, sqlCannotConnectNow,
		sqlReadOnlyTransaction:
		return errors.Join(app.ErrUnavailable, err)
	}
	return err
}

// settingError is PostgreSQL's refusal of a setting the service sends on
// its own (the guards, the key wait's lock_timeout). A data exception there
// (class 22, e.g. 22023 for a timeout over 2,147,483,647 ms) says nothing
// about the caller's request, so Translate leaves it an internal error
// instead of making it validation_failed. Configuration refuses such values
// at start; this is the backstop.
type settingError struct{ err error }

func (e settingError) Error() string {
	return "the server refused one of the service's settings: " + e.err.Error()
}
func (e settingError) Unwrap() error { return e.err }

// OwnSetting marks err, from a statement that carries only the service's
// settings, as a settingError when it is the server refusing the value (a
// data exception). Any other error (the connection, a cancellation) stays
// as it is, for Translate to map like any statement's.
func OwnSetting(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, sqlDataExceptionClass) {
		return settingError{err}
	}
	return err
}

// isReadOnly says whether err is a write refused by a read-only node: the
// connection it ran on leads to a standby or a demoted primary and should
// not serve another transaction.
func isReadOnly(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == sqlReadOnlyTransaction
}

// IsNoRows says whether a query found no row, before translation.
func IsNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// LockWaitEnded says whether err is a statement's wait that ran out
// (lock_timeout) or was cancelled, before translation.
func LockWaitEnded(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == sqlLockNotAvailable || pgErr.Code == sqlQueryCanceled)
}

// retryable says whether the whole transaction should run again.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == sqlSerializationFailure || pgErr.Code == sqlDeadlockDetected
	}
	return false
}

func isConnError(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	var netErr net.Error
	var connErr *pgconn.ConnectError
	return errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, context.DeadlineExceeded)
}
