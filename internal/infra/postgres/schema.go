package postgres

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/pressly/goose/v3/database"

	"github.com/ordersvc/ordersvc/db"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

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
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		v, contract, err := readMigration(e.Name())
		if err != nil {
			return Schema{}, err
		}
		s.versions = append(s.versions, v)
		s.Built = max(s.Built, v)
		if contract {
			s.contract[v] = true
		} else {
			s.Required = max(s.Required, v)
		}
	}
	slices.Sort(s.versions)
	return s, nil
}

// readMigration reads the embedded migration name: its version (the
// number before the first "_") and whether it is marked as a contract
// migration.
func readMigration(name string) (version int64, contract bool, err error) {
	num, _, ok := strings.Cut(name, "_")
	version, err = strconv.ParseInt(num, 10, 64)
	if !ok || err != nil {
		return 0, false, fmt.Errorf("migration %s: no version prefix", name)
	}
	body, err := db.Migrations.ReadFile(path.Join("migrations", name))
	if err != nil {
		return 0, false, err
	}
	return version, isContract(body), nil
}

// IsContract says whether migration v is marked as a contract migration.
func (s Schema) IsContract(v int64) bool { return s.contract[v] }

// Contracts lists the contract migrations, oldest first.
func (s Schema) Contracts() []int64 {
	var out []int64
	for _, v := range s.versions {
		if s.contract[v] {
			out = append(out, v)
		}
	}
	return out
}

// ExpandAfter lists the expand migrations after v. When v is a contract
// migration that cannot run yet, they are why this release cannot serve:
// it needs them (Required), and they apply only after v, which waits for
// the release before v to stop. Such a release is an upgrade stop
// (docs/migrations.md): a database before v is upgraded through the
// release that added v first.
func (s Schema) ExpandAfter(v int64) []int64 {
	var out []int64
	for _, w := range s.versions {
		if w > v && !s.contract[w] {
			out = append(out, w)
		}
	}
	return out
}

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
	applied, err := appliedMigrations(ctx, sqlDB)
	if err != nil {
		return nil, err
	}
	var missing []int64
	for _, v := range s.versions {
		if v <= s.Required && !s.contract[v] && !applied[v] {
			missing = append(missing, v)
		}
	}
	return missing, nil
}

// appliedMigrations reads goose's version table with goose's own store:
// whether each version recorded there is applied. A database never
// migrated has no table, and none.
func appliedMigrations(ctx context.Context, sqlDB *sql.DB) (map[int64]bool, error) {
	store, err := database.NewStore(database.DialectPostgres, gooseTable)
	if err != nil {
		return nil, err
	}
	applied := map[int64]bool{}
	ext, ok := store.(database.StoreExtender)
	if !ok {
		return applied, nil
	}
	if exists, err := ext.TableExists(ctx, sqlDB); err != nil || !exists {
		return applied, err
	}
	rows, err := store.ListMigrations(ctx, sqlDB)
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		applied[r.Version] = r.IsApplied
	}
	return applied, nil
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
