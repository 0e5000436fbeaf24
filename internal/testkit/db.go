// Package testkit gives tests a real PostgreSQL database of their own and the
// service's core on top of it: the pool, the transaction runner and the use
// cases, with typed fixtures, no HTTP. Its subpackage httpkit adds the real
// HTTP handler for the tests of the API. It is imported only by tests.
//
// The database server comes from TEST_DATABASE_URL when it is set (any
// superuser connection string; in the environment, or in the .env beside
// go.mod, which `go test` reads too: dotenv.go), and otherwise from testcontainers-go, which
// starts TEST_POSTGRES_IMAGE (default postgres:17-alpine) once per test
// binary. Migrations run once into a template database; each test then gets
// CREATE DATABASE … TEMPLATE, dropped in t.Cleanup, so tests run in parallel
// and may commit. When no database can be had, tests fail with a message
// that says how to provide one; they never skip. With TEST_PGBOUNCER=1 the
// tests reach their databases through PgBouncer (pgbouncer.go).
package testkit

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/ordersvc/ordersvc/db"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
)

// DefaultImage is the PostgreSQL image testcontainers starts unless
// TEST_POSTGRES_IMAGE names another (for example a locally built one on a
// machine with no registry).
const DefaultImage = "postgres:17-alpine"

// ContainerLabel marks the containers this package starts, so that CI can
// remove any that a crashed test binary left behind.
const ContainerLabel = "dev.ordersvc.test"

const howTo = `no PostgreSQL for the tests. Either
  - set TEST_DATABASE_URL to a superuser connection string, e.g.
    TEST_DATABASE_URL=postgres://postgres:postgres@localhost:5432/postgres?sslmode=disable
  - or make Docker available, so that testcontainers can start TEST_POSTGRES_IMAGE (default ` + DefaultImage + `)`

var (
	serverOnce sync.Once
	adminURL   string
	serverErr  error
	container  testcontainers.Container

	templateOnce sync.Once
	templateName string
	templateErr  error
)

// server returns the admin connection string of the test server, starting a
// container the first time when TEST_DATABASE_URL is not set.
func server() (string, error) {
	loadDotEnv()
	serverOnce.Do(func() {
		if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
			adminURL = u
			return
		}
		image := os.Getenv("TEST_POSTGRES_IMAGE")
		if image == "" {
			image = DefaultImage
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		c, err := tcpostgres.Run(ctx, image,
			tcpostgres.WithDatabase("postgres"),
			tcpostgres.WithUsername("postgres"),
			tcpostgres.WithPassword("postgres"),
			testcontainers.WithLabels(map[string]string{ContainerLabel: "true"}),
			// The read-replica tests' standby runs in the same container
			// on this port (StandbyOf).
			testcontainers.WithExposedPorts(standbyContainerPort),
			testcontainers.WithCmd("postgres", "-c", "max_connections=400", "-c", "fsync=off",
				"-c", "synchronous_commit=off", "-c", "full_page_writes=off"),
			testcontainers.WithWaitStrategy(wait.ForSQL("5432/tcp", "pgx", func(host string, port network.Port) string {
				return fmt.Sprintf("postgres://postgres:postgres@%s:%s/postgres?sslmode=disable", host, port.Port())
			}).WithStartupTimeout(2*time.Minute).WithPollInterval(250*time.Millisecond)),
		)
		if err != nil {
			serverErr = fmt.Errorf("start %s with testcontainers: %w", image, err)
			if c != nil {
				_ = c.Terminate(context.Background())
			}
			return
		}
		container = c
		adminURL, serverErr = c.ConnectionString(ctx, "sslmode=disable")
	})
	return adminURL, serverErr
}

// template migrates a template database once per server and schema: its name
// carries a hash of the migrations, and concurrent test binaries agree on who
// builds it through an advisory lock.
func template(ctx context.Context, admin string) (string, error) {
	templateOnce.Do(func() {
		templateName, templateErr = buildTemplate(ctx, admin)
	})
	return templateName, templateErr
}

func buildTemplate(ctx context.Context, admin string) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(db.Migrations, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := db.Migrations.ReadFile(path)
		h.Write([]byte(path))
		h.Write(b)
		return err
	})
	if err != nil {
		return "", err
	}
	name := "ordersvc_tpl_" + hex.EncodeToString(h.Sum(nil))[:12]

	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connect to the test server: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtext('ordersvc-test-template'))`); err != nil {
		return "", err
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtext('ordersvc-test-template'))`)
	}()
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	// Build under a scratch name and rename when complete, so that an
	// interrupted build never leaves a half-migrated template.
	scratch := name + "_building"
	if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+scratch+` WITH (FORCE)`); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+scratch); err != nil {
		return "", err
	}
	if err := migrate(ctx, withDatabase(admin, scratch)); err != nil {
		return "", fmt.Errorf("migrate the template: %w", err)
	}
	if _, err := conn.Exec(ctx, `ALTER DATABASE `+scratch+` RENAME TO `+name); err != nil {
		return "", err
	}
	return name, nil
}

func migrate(ctx context.Context, url string) error {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return err
	}
	sqlDB := stdlib.OpenDB(*cfg)
	defer sqlDB.Close()
	p, err := postgres.NewMigrator(sqlDB)
	if err != nil {
		return err
	}
	_, err = p.Up(ctx)
	return err
}

// withDatabase returns u with its database name replaced.
func withDatabase(u, name string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		return u
	}
	parsed.Path = "/" + name
	return parsed.String()
}

// DB creates a fresh, migrated database for t and returns its connection
// string. The database is dropped when t ends.
func DB(t testing.TB) string {
	t.Helper()
	admin, err := server()
	if err != nil {
		t.Fatalf("%v\n%s", err, howTo)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tpl, err := template(ctx, admin)
	if err != nil {
		t.Fatalf("prepare the template database: %v\n%s", err, howTo)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "ordersvc_t_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to the test server: %v\n%s", err, howTo)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+name+` TEMPLATE `+tpl); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Logf("drop test database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
			t.Logf("drop test database %s: %v", name, err)
		}
	})
	if ThroughPgBouncer() {
		u, err := viaPgBouncer(admin, name)
		if err != nil {
			t.Fatalf("TEST_PGBOUNCER=1: %v", err)
		}
		return u
	}
	return withDatabase(admin, name)
}
