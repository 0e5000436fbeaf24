package infra

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
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

// contractMarker starts the line that marks a contract migration: one that
// removes or changes something a previous release still uses (a column it
// reads, a trigger that keeps its writes correct), so it may run only once
// every binary older than it has stopped (docs/migrations.md).
const contractMarker = "-- contract:"

// Schema describes the embedded migrations: the schema this binary was built
// for and the one it needs to serve.
type Schema struct {
	// Built is the newest migration embedded: the schema this binary was
	// built for, announced in application_name.
	Built int64
	// Required is the newest expand migration embedded: every expand
	// migration up to it must be applied before this binary serves. A
	// contract migration is not required: it runs after the binary is
	// deployed.
	Required int64
	versions []int64
	contract map[int64]bool
}

// EmbeddedSchema reads the embedded migrations once per call; it derives the
// versions from the files, so no constant has to be kept in step with them.
func EmbeddedSchema() (Schema, error) {
	entries, err := fs.ReadDir(db.Migrations, "migrations")
	if err != nil {
		return Schema{}, err
	}
	s := Schema{contract: map[int64]bool{}}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil {
			return Schema{}, fmt.Errorf("migration %s: no version prefix", name)
		}
		body, err := db.Migrations.ReadFile(path.Join("migrations", name))
		if err != nil {
			return Schema{}, err
		}
		s.versions = append(s.versions, v)
		s.Built = max(s.Built, v)
		if isContract(body) {
			s.contract[v] = true
		} else {
			s.Required = max(s.Required, v)
		}
	}
	slices.Sort(s.versions)
	return s, nil
}

// IsContract says whether migration v is marked as a contract migration.
func (s Schema) IsContract(v int64) bool { return s.contract[v] }

func isContract(body []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if strings.HasPrefix(strings.TrimSpace(sc.Text()), contractMarker) {
			return true
		}
	}
	return false
}

// Missing lists the expand migrations up to Required that the database has
// not applied (none: this binary may serve; a newer schema is fine). It reads
// goose's version table with goose's own store; a database never migrated
// misses them all.
func (s Schema) Missing(ctx context.Context, sqlDB *sql.DB) ([]int64, error) {
	store, err := database.NewStore(database.DialectPostgres, gooseTable)
	if err != nil {
		return nil, err
	}
	exists := false
	if ext, ok := store.(database.StoreExtender); ok {
		if exists, err = ext.TableExists(ctx, sqlDB); err != nil {
			return nil, err
		}
	}
	applied := map[int64]bool{}
	if exists {
		rows, err := store.ListMigrations(ctx, sqlDB)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			applied[r.Version] = r.IsApplied
		}
	}
	var missing []int64
	for _, v := range s.versions {
		if v <= s.Required && !s.contract[v] && !applied[v] {
			missing = append(missing, v)
		}
	}
	return missing, nil
}

// applicationPrefix is what every connection of this service calls itself.
// Releases before the schema announcement say exactly "ordersvc".
const applicationPrefix = "ordersvc"

// Announcement is the application_name of role's connections ("serve",
// "migrate", ...): "ordersvc serve schema=8" says that the process was built
// for schema 8. `api migrate up` refuses a contract migration while sessions
// announce an older schema (or none), and the transition triggers of the
// expand migrations keep the writes of sessions that announce no schema
// correct (docs/migrations.md).
func (s Schema) Announcement(role string) string {
	return fmt.Sprintf("%s %s schema=%d", applicationPrefix, role, s.Built)
}

// AnnouncedSchema reads an application_name: service is true for a
// connection of this service, and schema is the version it announces, 0 for
// a release that announced none ("ordersvc").
func AnnouncedSchema(applicationName string) (schema int64, service bool) {
	if applicationName == applicationPrefix {
		return 0, true
	}
	if !strings.HasPrefix(applicationName, applicationPrefix+" ") {
		return 0, false
	}
	_, v, ok := strings.Cut(applicationName, " schema=")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// OlderSessions counts the sessions of this service, other than the caller's,
// that announce a schema older than version, or none, by application_name.
func OlderSessions(ctx context.Context, conn dbsqlc.DBTX, version int64) (map[string]int64, error) {
	rows, err := dbsqlc.New().SessionsByApplication(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	older := map[string]int64{}
	for _, r := range rows {
		if v, service := AnnouncedSchema(r.ApplicationName); service && v < version {
			older[r.ApplicationName] += r.Sessions
		}
	}
	return older, nil
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
		return res, fmt.Errorf("%w: migration %s is a contract migration: it needs every binary older than schema %d stopped, and %s; "+
			"roll every replica to this release, then run `api migrate up` again (or `api migrate up --force-contract` to apply it anyway)",
			ErrOlderBinaries, path.Base(st.Source.Path), v, describeSessions(older))
	}
	return upTo(ctx, p, math.MaxInt64)
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
