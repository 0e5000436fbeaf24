package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/ordersvc/ordersvc/db"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

// gooseTable is goose's version table, where each applied migration has a row.
const gooseTable = "goose_db_version"

// NewMigrator returns a goose provider over the embedded migrations.
//
// The lock is goose's table locker (a row in goose_lock, held with a lease
// and a heartbeat), not a session advisory lock: it works through a
// transaction pooler such as PgBouncer, which does not keep a session for a
// client, so concurrent "migrate up" runs (several replicas, or two deploy
// jobs) apply each migration once wherever MIGRATE_DATABASE_URL points. A
// process that dies holding the lock loses it when the lease (30 s) runs out.
//
// Out-of-order migrations are allowed: 00006 was released before 00005, so a
// database migrated by that release holds 00006 but not 00005, and goose would
// otherwise refuse to apply 00005 there ("missing migrations").
func NewMigrator(sqlDB *sql.DB) (*goose.Provider, error) {
	migrations, err := fs.Sub(db.Migrations, "migrations")
	if err != nil {
		return nil, err
	}
	locker, err := lock.NewPostgresTableLocker(lock.WithTableLockTimeout(time.Second, 600))
	if err != nil {
		return nil, err
	}
	return goose.NewProvider(goose.DialectPostgres, sqlDB, migrations,
		goose.WithLocker(locker), goose.WithAllowOutofOrder(true))
}

// ErrOlderBinaries is returned by MigrateUp when a contract migration is
// pending while older binaries are connected.
var ErrOlderBinaries = errors.New("older binaries are still connected")

// MigrateOptions tune MigrateUp.
type MigrateOptions struct {
	// ForceContract applies contract migrations even while sessions
	// announce an older schema (or none).
	ForceContract bool
	// LockRetries is how many times a run that failed on a lock timeout
	// (55P03: a DDL statement's lock_timeout ran out behind the
	// application's transactions) is tried again; 0 means 10.
	LockRetries int
	// LockRetryWait is the first pause between tries, doubled each time up
	// to 8 times; 0 means 500 ms.
	LockRetryWait time.Duration
	Log           *slog.Logger
}

// MigrateUp applies the pending migrations in order. A contract migration is
// applied only when no session announces an older schema (or none), unless
// o.ForceContract: otherwise the expand migrations before it are applied and
// the error (ErrOlderBinaries) says which sessions to stop. Every DDL
// statement carries its own lock_timeout (docs/migrations.md); when one runs
// out, the run is tried again after a pause, a bounded number of times, so a
// migration never queues the application behind it for longer than that
// timeout.
func MigrateUp(ctx context.Context, p *goose.Provider, conn dbsqlc.DBTX, o MigrateOptions) ([]*goose.MigrationResult, error) {
	s, err := EmbeddedSchema()
	if err != nil {
		return nil, err
	}
	if o.LockRetries == 0 {
		o.LockRetries = 10
	}
	if o.LockRetryWait == 0 {
		o.LockRetryWait = 500 * time.Millisecond
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	var applied []*goose.MigrationResult
	wait := o.LockRetryWait
	for attempt := 0; ; attempt++ {
		res, err := migrateUpOnce(ctx, p, conn, s, o.ForceContract)
		applied = append(applied, res...)
		if err == nil || !isLockTimeout(err) || attempt >= o.LockRetries {
			return applied, err
		}
		o.Log.Warn("a migration statement ran out of lock_timeout behind the application's transactions; trying again",
			"attempt", attempt+1, "of", o.LockRetries, "wait", wait, "err", err)
		select {
		case <-ctx.Done():
			return applied, ctx.Err()
		case <-time.After(wait):
		}
		if attempt < 8 {
			wait *= 2
		}
	}
}

func migrateUpOnce(ctx context.Context, p *goose.Provider, conn dbsqlc.DBTX, s Schema, force bool) ([]*goose.MigrationResult, error) {
	status, err := p.Status(ctx)
	if err != nil {
		return nil, err
	}
	for _, st := range status {
		v := st.Source.Version
		if st.State == goose.StateApplied || !s.IsContract(v) || force {
			continue
		}
		older, err := OlderSessions(ctx, conn, v)
		if err != nil {
			return nil, err
		}
		if len(older) == 0 {
			continue
		}
		// Apply what comes before the contract migration, then stop.
		res, err := upTo(ctx, p, v-1)
		if err != nil {
			return res, err
		}
		return res, contractRefused(s, path.Base(st.Source.Path), v, older)
	}
	return upTo(ctx, p, math.MaxInt64)
}

// contractRefused is MigrateUp's answer when contract migration v, named
// name, waits for the older sessions to stop: what to do next. When this
// release also has expand migrations after v, rolling the replicas to it
// cannot work (they need those migrations to turn ready, and those apply
// only after v), and the answer names the upgrade stop instead.
func contractRefused(s Schema, name string, v int64, older map[string]int64) error {
	later := s.ExpandAfter(v)
	if len(later) == 0 {
		return fmt.Errorf("%w: migration %s is a contract migration: it needs every binary older than schema %d stopped, and %s; "+
			"roll every replica to this release, then run `api migrate up` again (or `api migrate up --force-contract` to apply it anyway)",
			ErrOlderBinaries, name, v, describeSessions(older))
	}
	return fmt.Errorf("%w: migration %s is a contract migration: it needs every binary older than schema %d stopped, and %s; "+
		"this release cannot serve before it runs, since it needs the expand migrations %s, which come after it: "+
		"this database must first be upgraded to the release that added %s and contracted, an upgrade stop (docs/migrations.md); "+
		"otherwise stop every older replica (an outage) and run `api migrate up` again",
		ErrOlderBinaries, name, v, describeSessions(older), versionList(later), name)
}

// versionList spells versions as migration numbers: "00009, 00010".
func versionList(vs []int64) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprintf("%05d", v)
	}
	return strings.Join(parts, ", ")
}

func upTo(ctx context.Context, p *goose.Provider, v int64) ([]*goose.MigrationResult, error) {
	res, err := p.UpTo(ctx, v)
	var partial *goose.PartialError
	if errors.As(err, &partial) {
		return partial.Applied, err
	}
	return res, err
}

func describeSessions(older map[string]int64) string {
	var parts []string
	for name, n := range older {
		parts = append(parts, fmt.Sprintf("%d connected as %q", n, name))
	}
	slices.Sort(parts)
	return "sessions of older binaries are connected: " + strings.Join(parts, ", ")
}

// isLockTimeout reports SQLSTATE 55P03 (lock_not_available) anywhere in err.
func isLockTimeout(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "55P03"
}
