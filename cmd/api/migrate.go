package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/ordersvc/ordersvc/internal/infra/postgres"
)

const usageMigrate = "usage: api migrate up [--force-contract] | down | status"

// migrate runs `api migrate up|down|status` on MIGRATE_DATABASE_URL.
func migrate(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	command, force, err := parseMigrate(args)
	if err != nil {
		return err
	}
	c, err := loadConfig(getenv, true)
	if err != nil {
		return err
	}
	// MIGRATE_DATABASE_URL may go direct to PostgreSQL or through a
	// transaction pooler: goose's lock is a table row, not a session lock.
	c.DatabaseURL = c.MigrateDatabaseURL
	pool, err := openPool(ctx, c, "migrate", nil)
	if err != nil {
		return err
	}
	defer pool.Close()
	sqlDB := stdlib.OpenDBFromPool(pool.Pool)
	defer sqlDB.Close()
	p, err := postgres.NewMigrator(sqlDB)
	if err != nil {
		return err
	}
	switch command {
	case "up":
		return migrateUp(ctx, p, pool.Pool, postgres.MigrateOptions{ForceContract: force, Log: newLogger(stdout, c.LogLevel)}, stdout)
	case "down":
		return migrateDown(ctx, p, stdout)
	default:
		return migrateStatus(ctx, p, stdout)
	}
}

// parseMigrate returns the subcommand and whether --force-contract was
// given (up only).
func parseMigrate(args []string) (command string, force bool, err error) {
	if len(args) == 0 || (args[0] != "up" && args[0] != "down" && args[0] != "status") {
		return "", false, errors.New(usageMigrate)
	}
	fl := flag.NewFlagSet("migrate "+args[0], flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	forced := fl.Bool("force-contract", false, "apply contract migrations while older binaries are connected")
	if err := fl.Parse(args[1:]); err != nil || fl.NArg() > 0 || (*forced && args[0] != "up") {
		return "", false, errors.New(usageMigrate)
	}
	return args[0], *forced, nil
}

func migrateUp(ctx context.Context, p *goose.Provider, pool *pgxpool.Pool, opts postgres.MigrateOptions, stdout io.Writer) error {
	res, err := postgres.MigrateUp(ctx, p, pool, opts)
	for _, r := range res {
		fmt.Fprintf(stdout, "applied %s (%s)\n", r.Source.Path, r.Duration.Round(time.Millisecond))
	}
	if err == nil && len(res) == 0 {
		fmt.Fprintln(stdout, "no migrations to apply")
	}
	return err
}

func migrateDown(ctx context.Context, p *goose.Provider, stdout io.Writer) error {
	r, err := p.Down(ctx)
	if r != nil {
		fmt.Fprintf(stdout, "rolled back %s\n", r.Source.Path)
	}
	return err
}

func migrateStatus(ctx context.Context, p *goose.Provider, stdout io.Writer) error {
	st, err := p.Status(ctx)
	s, serr := postgres.EmbeddedSchema()
	if serr != nil {
		return serr
	}
	for _, m := range st {
		applied := "pending"
		if m.State == goose.StateApplied {
			applied = "applied " + m.AppliedAt.UTC().Format(time.RFC3339)
		}
		if s.IsContract(m.Source.Version) {
			applied += " (contract)"
		}
		fmt.Fprintf(stdout, "%-40s %s\n", m.Source.Path, applied)
	}
	return err
}
