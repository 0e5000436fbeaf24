package main

import (
	"context"
	"strings"
	"testing"

	"github.com/ordersvc/ordersvc/internal/app"
)

func TestBenchmarkSwitchesAreOffByDefault(t *testing.T) {
	env := map[string]string{"DATABASE_URL": "postgres://x@localhost/db"}
	c, err := loadConfig(func(k string) string { return env[k] }, true)
	if err != nil {
		t.Fatal(err)
	}
	if c.BenchDisableIdempotency {
		t.Error("BENCH_DISABLE_IDEMPOTENCY is on without being set")
	}
	if c.PprofAddr != "" {
		t.Errorf("PPROF_ADDR defaults to %q, want off", c.PprofAddr)
	}
}

func TestBenchDisableIdempotencyParsing(t *testing.T) {
	for v, want := range map[string]bool{"1": true, "true": true, "0": false, "false": false} {
		env := map[string]string{"DATABASE_URL": "postgres://x@localhost/db", "BENCH_DISABLE_IDEMPOTENCY": v}
		c, err := loadConfig(func(k string) string { return env[k] }, true)
		if err != nil || c.BenchDisableIdempotency != want {
			t.Errorf("BENCH_DISABLE_IDEMPOTENCY=%s: got %v, %v; want %v", v, c.BenchDisableIdempotency, err, want)
		}
	}
	env := map[string]string{"DATABASE_URL": "postgres://x@localhost/db", "BENCH_DISABLE_IDEMPOTENCY": "yes"}
	if _, err := loadConfig(func(k string) string { return env[k] }, true); err == nil {
		t.Error("BENCH_DISABLE_IDEMPOTENCY=yes was accepted; only 1/true/0/false are")
	}
}

// TestBenchDisableIdempotencyWiresNoKeyStore: the benchmark switch lives in
// the wiring, not in a handler: it replaces the key store with one that
// keeps nothing, and without it the store is the database's.
func TestBenchDisableIdempotencyWiresNoKeyStore(t *testing.T) {
	if k := keyConfig(config{}); k.Store != nil {
		t.Errorf("default key store %T, want the database's (nil)", k.Store)
	}
	k := keyConfig(config{BenchDisableIdempotency: true})
	if _, ok := k.Store.(noKeys); !ok {
		t.Fatalf("BENCH_DISABLE_IDEMPOTENCY=1: key store %T, want noKeys", k.Store)
	}
	if r, err := k.Store.Claim(context.Background(), app.Key{Value: "k"}); r != nil || err != nil {
		t.Errorf("noKeys.Claim = %v, %v; want a new key", r, err)
	}
}

func TestMigrateDatabaseURLDefaultsToDatabaseURL(t *testing.T) {
	env := map[string]string{"DATABASE_URL": "postgres://x@pgbouncer/db"}
	c, err := loadConfig(func(k string) string { return env[k] }, true)
	if err != nil || c.MigrateDatabaseURL != env["DATABASE_URL"] {
		t.Fatalf("MIGRATE_DATABASE_URL unset: %q, %v; want DATABASE_URL", c.MigrateDatabaseURL, err)
	}
	env["MIGRATE_DATABASE_URL"] = "postgres://x@postgres/db"
	if c, err = loadConfig(func(k string) string { return env[k] }, true); err != nil || c.MigrateDatabaseURL != env["MIGRATE_DATABASE_URL"] {
		t.Fatalf("MIGRATE_DATABASE_URL set: %q, %v", c.MigrateDatabaseURL, err)
	}
}

// TestTracingSettings: tracing is off unless OTEL_EXPORTER_OTLP_ENDPOINT is
// set, the service name defaults to ordersvc, a relative endpoint is refused,
// and spans go to the endpoint's /v1/traces.
func TestTracingSettings(t *testing.T) {
	t.Parallel()
	c, err := loadConfig(env("DATABASE_URL", "postgres://x@localhost/db"), true)
	if err != nil || c.OTLPEndpoint != "" || c.ServiceName != "ordersvc" {
		t.Errorf("defaults: endpoint %q, service name %q, %v; want off and ordersvc", c.OTLPEndpoint, c.ServiceName, err)
	}
	if _, err := loadConfig(env("DATABASE_URL", "postgres://x@localhost/db", "OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"), true); err == nil ||
		!strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_ENDPOINT") {
		t.Errorf("an endpoint without a scheme: %v, want an error naming OTEL_EXPORTER_OTLP_ENDPOINT", err)
	}
	for endpoint, want := range map[string]string{
		"http://collector:4318":        "http://collector:4318/v1/traces",
		"https://otlp.example.test/":   "https://otlp.example.test/v1/traces",
		"http://gateway:8080/otlp/api": "http://gateway:8080/otlp/api/v1/traces",
	} {
		if got := tracesURL(endpoint); got != want {
			t.Errorf("tracesURL(%q) = %q, want %q", endpoint, got, want)
		}
	}
}

// TestSettingsOutOfBoundsAreRefusedAtStart: a value its consumer would
// refuse or misread is refused at start, with one line naming the
// setting. Before the bounds, DB_LOCK_TIMEOUT=600h started and PostgreSQL
// then refused it on every transaction (every /v1 request answered 422, the
// purge and retention stopped), and 500us was sent as 0, which switches the
// guard off.
func TestSettingsOutOfBoundsAreRefusedAtStart(t *testing.T) {
	t.Parallel()
	for _, bad := range []struct{ name, value string }{
		{"DB_LOCK_TIMEOUT", "600h"},
		{"DB_LOCK_TIMEOUT", "500us"},
		{"DB_LOCK_TIMEOUT", "1500us"},
		{"DB_STATEMENT_TIMEOUT", "2147483648ms"},
		{"DB_IDLE_IN_TX_TIMEOUT", "0.5ms"},
		{"IDEMPOTENCY_WAIT", "600h"},
		{"CLEANUP_INTERVAL", "1ns"},
		{"OUTBOX_POLL_INTERVAL", "10us"},
		{"OUTBOX_BATCH_SIZE", "1001"},
		{"DB_MAX_CONNS", "2147483648"},
	} {
		_, err := loadConfig(env("DATABASE_URL", "postgres://x@localhost/db", bad.name, bad.value), true)
		if err == nil || !strings.HasPrefix(err.Error(), bad.name+"=") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s=%s: %v, want one line naming the setting", bad.name, bad.value, err)
		}
	}
	for _, good := range []struct{ name, value string }{
		{"DB_LOCK_TIMEOUT", "1ms"},
		{"DB_STATEMENT_TIMEOUT", "2147483647ms"},
		{"DB_IDLE_IN_TX_TIMEOUT", "596h"},
	} {
		if _, err := loadConfig(env("DATABASE_URL", "postgres://x@localhost/db", good.name, good.value), true); err != nil {
			t.Errorf("%s=%s refused: %v", good.name, good.value, err)
		}
	}
}

// TestMalformedDatabaseURLsAreRefusedUnderTheirOwnName: a connection string
// pgx cannot parse stops the start with one line naming the variable that
// holds it (before, a bad MIGRATE_DATABASE_URL was reported as
// DATABASE_URL), and the line never repeats the value, which may hold a
// password.
func TestMalformedDatabaseURLsAreRefusedUnderTheirOwnName(t *testing.T) {
	t.Parallel()
	const good, bad = "postgres://x@localhost/db", "postgres://u:s3cret@%%%/db"
	for _, name := range []string{"DATABASE_URL", "MIGRATE_DATABASE_URL"} {
		vars := []string{"DATABASE_URL", good, name, bad}
		_, err := loadConfig(env(vars...), true)
		if err == nil || !strings.HasPrefix(err.Error(), name+": ") || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s malformed: %v, want one line naming %s without the value", name, err, name)
		}
	}
}
