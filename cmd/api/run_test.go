package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/ordersvc/ordersvc/db"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// env is a getenv over a fixed set of variables.
func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// runCmd runs the program and returns its stdout and error.
func runCmd(t *testing.T, getenv func(string) string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, args, getenv, &out)
	return out.String(), err
}

// unreachable is a database address where nothing listens.
const unreachable = "postgres://x@127.0.0.1:1/x?connect_timeout=2"

// TestRunFailsWithOneClearLine: bad configuration, a missing or unreachable
// database and bad arguments end the program with an error whose message is
// one line that names the problem.
func TestRunFailsWithOneClearLine(t *testing.T) {
	t.Parallel()
	db := "postgres://x@127.0.0.1:1/x"
	cases := []struct {
		name   string
		getenv func(string) string
		args   []string
		want   string
	}{
		{"unparsable TTL", env("DATABASE_URL", db, "IDEMPOTENCY_TTL", "a day"), []string{"serve"}, `IDEMPOTENCY_TTL="a day": not a duration`},
		{"zero wait", env("DATABASE_URL", db, "IDEMPOTENCY_WAIT", "0s"), []string{"serve"}, `IDEMPOTENCY_WAIT="0s": a PostgreSQL timeout: must be whole milliseconds from 1ms`},
		{"negative interval", env("DATABASE_URL", db, "CLEANUP_INTERVAL", "-1m"), []string{"serve"}, `CLEANUP_INTERVAL="-1m": must be at least 1ms`},
		{"unit-less duration", env("DATABASE_URL", db, "SHUTDOWN_TIMEOUT", "20"), []string{"serve"}, `SHUTDOWN_TIMEOUT="20": not a duration`},
		{"wait past statement timeout", env("DATABASE_URL", db, "IDEMPOTENCY_WAIT", "30s"), []string{"serve"}, "IDEMPOTENCY_WAIT (30s) must be shorter than DB_STATEMENT_TIMEOUT (10s)"},
		{"log level", env("DATABASE_URL", db, "LOG_LEVEL", "loud"), []string{"serve"}, `LOG_LEVEL="loud"`},
		{"pool size", env("DATABASE_URL", db, "DB_MAX_CONNS", "-3"), []string{"serve"}, `DB_MAX_CONNS="-3": not a non-negative integer`},
		{"no DATABASE_URL, serve", env(), []string{"serve"}, "DATABASE_URL is required"},
		{"no DATABASE_URL, migrate", env(), []string{"migrate", "up"}, "DATABASE_URL is required"},
		{"no DATABASE_URL, actor", env(), []string{"actor", "create", "--name", "A", "--role", "staff"}, "DATABASE_URL is required"},
		{"no DATABASE_URL, seed", env(), []string{"seed"}, "DATABASE_URL is required"},
		{"no DATABASE_URL, check", env(), []string{"check"}, "DATABASE_URL is required"},
		{"unreachable, check", env("DATABASE_URL", unreachable), []string{"check"}, "database unreachable"},
		{"check with an argument", env("DATABASE_URL", unreachable), []string{"check", "--all"}, "usage: api check"},
		{"unparsable DATABASE_URL", env("DATABASE_URL", "postgres://%zz"), []string{"serve"}, "DATABASE_URL: not a PostgreSQL connection string"},
		{"unparsable MIGRATE_DATABASE_URL", env("DATABASE_URL", unreachable, "MIGRATE_DATABASE_URL", "postgres://%zz"), []string{"migrate", "status"}, "MIGRATE_DATABASE_URL: not a PostgreSQL connection string"},
		{"unreachable, serve", env("DATABASE_URL", unreachable), []string{"serve"}, "database unreachable"},
		{"unreachable, migrate", env("DATABASE_URL", unreachable), []string{"migrate", "status"}, "database unreachable"},
		{"unreachable, actor", env("DATABASE_URL", unreachable), []string{"actor", "create", "--name", "A", "--role", "staff"}, "database unreachable"},
		{"unreachable, seed", env("DATABASE_URL", unreachable), []string{"seed"}, "database unreachable"},
		{"migrate sideways", env("DATABASE_URL", unreachable), []string{"migrate", "sideways"}, "usage: api migrate up [--force-contract] | down | status"},
		{"actor without create", env(), []string{"actor"}, "usage: api actor create"},
		{"actor unknown flag", env("DATABASE_URL", unreachable), []string{"actor", "create", "--colour", "red"}, "actor create: flag provided but not defined: -colour"},
		{"actor extra argument", env("DATABASE_URL", unreachable), []string{"actor", "create", "--name", "A", "extra"}, `actor create: unexpected argument "extra"`},
		{"healthcheck, bad HTTP_ADDR", env("HTTP_ADDR", "nonsense"), []string{"healthcheck"}, `HTTP_ADDR "nonsense"`},
		{"healthcheck, nothing listening", env("HTTP_ADDR", "127.0.0.1:1"), []string{"healthcheck"}, "healthcheck:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := runCmd(t, c.getenv, c.args...)
			if err == nil {
				t.Fatalf("run %v succeeded, want an error", c.args)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("the error is not one line:\n%s", msg)
			}
			if !strings.Contains(msg, c.want) {
				t.Errorf("error %q does not say %q", msg, c.want)
			}
		})
	}
}

// TestRunUnknownCommand: an unknown command is refused, naming the command
// on the first line; the usage follows it.
func TestRunUnknownCommand(t *testing.T) {
	t.Parallel()
	_, err := runCmd(t, env(), "frobnicate")
	if err == nil {
		t.Fatal("unknown command accepted")
	}
	first, rest, _ := strings.Cut(err.Error(), "\n")
	if first != `unknown command "frobnicate"` || !strings.Contains(rest, "usage: api <command>") {
		t.Errorf("error %q", err)
	}
	if _, err := runCmd(t, env()); err == nil || !strings.HasPrefix(err.Error(), "usage: api <command>") {
		t.Errorf("no command: %v, want the usage", err)
	}
	out, err := runCmd(t, env(), "help")
	if err != nil || !strings.Contains(out, "actor create --name NAME") {
		t.Errorf("help: %v %q", err, out)
	}
}

// TestMigrateUsesMigrateDatabaseURL: `api migrate` connects with
// MIGRATE_DATABASE_URL when it is set, and only then; the other commands
// keep DATABASE_URL.
func TestMigrateUsesMigrateDatabaseURL(t *testing.T) {
	t.Parallel()
	url := testkit.Direct(testkit.DB(t))
	const unreachable = "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=1"
	out, err := runCmd(t, env("DATABASE_URL", unreachable, "MIGRATE_DATABASE_URL", url), "migrate", "status")
	if err != nil || !strings.Contains(out, "applied") {
		t.Fatalf("migrate status with MIGRATE_DATABASE_URL set: %v %q", err, out)
	}
	if _, err := runCmd(t, env("DATABASE_URL", url, "MIGRATE_DATABASE_URL", unreachable), "migrate", "status"); err == nil ||
		!strings.Contains(err.Error(), "database unreachable") {
		t.Fatalf("migrate status ignored MIGRATE_DATABASE_URL: %v", err)
	}
	if _, err := runCmd(t, env("DATABASE_URL", url, "MIGRATE_DATABASE_URL", unreachable), "actor", "create", "--name", "A", "--role", "staff"); err != nil {
		t.Fatalf("actor create used MIGRATE_DATABASE_URL: %v", err)
	}
}

// TestRunMigrateAndActorCreate: migrate runs against a real database (up,
// status, down, up again) on MIGRATE_DATABASE_URL, the direct connection,
// and actor create, on DATABASE_URL (through PgBouncer with
// TEST_PGBOUNCER=1), prints exactly {"actor_id","token"} while the database
// keeps only the token's hash.
func TestRunMigrateAndActorCreate(t *testing.T) {
	t.Parallel()
	url := testkit.DB(t) // already migrated
	getenv := env("DATABASE_URL", url, "MIGRATE_DATABASE_URL", testkit.Direct(url))

	out, err := runCmd(t, getenv, "migrate", "up")
	if err != nil || !strings.Contains(out, "no migrations to apply") {
		t.Fatalf("migrate up on a migrated database: %v %q", err, out)
	}
	files, err := fs.Glob(db.Migrations, "migrations/*.sql")
	if err != nil || len(files) < 2 {
		t.Fatalf("embedded migrations: %v %v", files, err)
	}
	last := path.Base(files[len(files)-1])
	out, err = runCmd(t, getenv, "migrate", "down")
	if err != nil || !strings.Contains(out, "rolled back "+last) {
		t.Fatalf("migrate down: %v %q", err, out)
	}
	out, err = runCmd(t, getenv, "migrate", "status")
	if err != nil || !strings.Contains(out, "pending") || strings.Count(out, "applied") != len(files)-1 {
		t.Fatalf("migrate status after down: %v %q", err, out)
	}
	out, err = runCmd(t, getenv, "migrate", "up")
	if err != nil || !strings.Contains(out, "applied "+last) {
		t.Fatalf("migrate up: %v %q", err, out)
	}

	out, err = runCmd(t, getenv, "actor", "create", "--name", "Ann Admin", "--role", "staff")
	if err != nil {
		t.Fatalf("actor create: %v", err)
	}
	var created map[string]string
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(&created); err != nil {
		t.Fatalf("actor create printed %q: %v", out, err)
	}
	if dec.More() || strings.Count(out, "\n") != 1 {
		t.Errorf("actor create printed more than one JSON object: %q", out)
	}
	keys := make([]string, 0, len(created))
	for k := range created {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"actor_id", "token"}) {
		t.Errorf("actor create printed members %v, want actor_id and token", keys)
	}
	if _, err := uuid.Parse(created["actor_id"]); err != nil || !strings.HasPrefix(created["token"], "osk_") {
		t.Errorf("actor create printed %v", created)
	}

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var role string
	var hash []byte
	err = conn.QueryRow(ctx, `SELECT a.role, t.token_hash FROM actors a JOIN api_tokens t ON t.actor_id = a.id WHERE a.id = $1`,
		created["actor_id"]).Scan(&role, &hash)
	if err != nil {
		t.Fatalf("the created actor: %v", err)
	}
	if sum := sha256.Sum256([]byte(created["token"])); role != "staff" || !bytes.Equal(hash, sum[:]) {
		t.Errorf("stored role %q and token hash %x; want staff and the token's SHA-256", role, hash)
	}

	_, err = runCmd(t, getenv, "actor", "create", "--name", "Bob", "--role", "admin")
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "role") {
		t.Errorf("actor create with a bad role: %v, want one line naming the role", err)
	}
}

// TestServeAnswersAndShutsDownGracefully: serve listens, answers /healthz and
// /readyz, and returns nil once its context ends, leaving no goroutine behind.
func TestServeAnswersAndShutsDownGracefully(t *testing.T) {
	url := testkit.DB(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs bytes.Buffer
	listening := make(chan string, 1)
	done := make(chan error, 1)
	getenv := env("DATABASE_URL", url, "HTTP_ADDR", "127.0.0.1:0", "SHUTDOWN_TIMEOUT", "5s")
	go func() { done <- serve(ctx, getenv, &logs, listening) }()

	var addr string
	select {
	case addr = <-listening:
	case err := <-done:
		t.Fatalf("serve ended before listening: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not start listening")
	}

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	for _, p := range []string{"/healthz", "/readyz"} {
		res, err := client.Get("http://" + addr + p)
		if err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || string(body) != "ok\n" {
			t.Errorf("GET %s: %d %q", p, res.StatusCode, body)
		}
	}
	client.CloseIdleConnections()
	if _, err := runCmd(t, env("HTTP_ADDR", addr), "healthcheck"); err != nil {
		t.Errorf("healthcheck against the running server: %v", err)
	}
	http.DefaultClient.CloseIdleConnections()

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve returned %v after its context ended, want nil", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not shut down")
	}
	if !strings.Contains(logs.String(), `"msg":"stopped"`) {
		t.Errorf("no clean stop in the log:\n%s", logs.String())
	}
	if _, err := client.Get("http://" + addr + "/healthz"); err == nil {
		t.Error("the server still answers after shutdown")
	}
}
