package infra

import (
	"database/sql"
	"io/fs"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/ordersvc/ordersvc/db"
)

// NewMigrator returns a goose provider over the embedded migrations. The
// session locker (a PostgreSQL advisory lock) makes concurrent "migrate up"
// runs, for example from several replicas, apply each migration once.
func NewMigrator(sqlDB *sql.DB) (*goose.Provider, error) {
	migrations, err := fs.Sub(db.Migrations, "migrations")
	if err != nil {
		return nil, err
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, err
	}
	return goose.NewProvider(goose.DialectPostgres, sqlDB, migrations, goose.WithSessionLocker(locker))
}
