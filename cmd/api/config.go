package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ordersvc/ordersvc/internal/infra/outbox"
)

// config is every setting of the service, parsed once from the environment.
// Nothing else reads the environment.
type config struct {
	DatabaseURL string
	// MigrateDatabaseURL is the connection of `api migrate`. Direct to
	// PostgreSQL is advised (the contract step reads pg_stat_activity), but
	// a transaction pooler works: goose's lock is a table row, and every
	// lock_timeout of a migration is local to its transaction.
	MigrateDatabaseURL string
	HTTPAddr           string
	IdempotencyTTL     time.Duration
	IdempotencyWait    time.Duration
	CleanupInterval    time.Duration
	// OutboxWebhookURL is where events are delivered. Unset (and not
	// OutboxLogOnly): this process runs no dispatcher and events stay
	// pending for a process that has one.
	OutboxWebhookURL string
	// OutboxLogOnly (OUTBOX_WEBHOOK_URL=log, demos only) marks each event
	// delivered in the log instead of sending it.
	OutboxLogOnly bool
	LogLevel      slog.Level

	OutboxPollInterval time.Duration
	OutboxBatchSize    int
	OutboxConcurrency  int
	OutboxRetention    time.Duration
	OutboxSecrets      [][]byte
	OutboxMaxAttempts  int
	OutboxClaimTimeout time.Duration
	OutboxHTTPTimeout  time.Duration
	OutboxBackoffBase  time.Duration
	OutboxBackoffMax   time.Duration

	DBMaxConns         int32
	DBStatementTimeout time.Duration
	DBLockTimeout      time.Duration
	DBIdleInTxTimeout  time.Duration
	ShutdownTimeout    time.Duration
	// RequestTimeout bounds every /v1 request as a whole.
	RequestTimeout time.Duration
	// ShutdownDrain is how long /readyz answers 503 after SIGTERM while
	// requests are still served, before the listener closes.
	ShutdownDrain time.Duration

	// OTLPEndpoint, when set, turns tracing on: spans are exported there
	// with OTLP over HTTP (the standard OTEL_EXPORTER_OTLP_ENDPOINT, a base
	// URL to which /v1/traces is added). Empty: no tracer provider at all.
	OTLPEndpoint string
	// ServiceName is the service.name of the exported spans.
	ServiceName string

	// MetricsAddr, when set, serves GET /metrics on a listener of its own
	// (for example :9090), and the public one (HTTP_ADDR) no longer does.
	MetricsAddr string

	// PprofAddr, when set, serves net/http/pprof on its own listener (for
	// example 127.0.0.1:6060). Off by default: profiles expose internals.
	PprofAddr string
	// BenchDisableIdempotency is for benchmarks ONLY (BENCH_DISABLE_IDEMPOTENCY=1):
	// writes still require and validate the Idempotency-Key header but the
	// key store keeps nothing (keyConfig), so a retried request runs again:
	// a retried placement places a second order. It exists to measure what the keys cost and
	// must never be set in a real deployment.
	BenchDisableIdempotency bool

	// ReadDatabaseURL, when set, is a streaming replica that queries read
	// when it proves current (store.ReplicaReader, ADR 0023).
	ReadDatabaseURL string
}

// setting documents one environment variable; the README's configuration
// table lists the same names and defaults.
type setting struct {
	name, def string
	apply     func(c *config, v string) error
}

var settings = []setting{
	{"DATABASE_URL", "", databaseURLInto(func(c *config) *string { return &c.DatabaseURL })},
	{"MIGRATE_DATABASE_URL", "", databaseURLInto(func(c *config) *string { return &c.MigrateDatabaseURL })},
	{"READ_DATABASE_URL", "", func(c *config, v string) error { c.ReadDatabaseURL = v; return nil }},
	{"HTTP_ADDR", ":8080", func(c *config, v string) error { c.HTTPAddr = v; return nil }},
	{"IDEMPOTENCY_TTL", "24h", durationInto(func(c *config) *time.Duration { return &c.IdempotencyTTL })},
	{"IDEMPOTENCY_WAIT", "5s", guardInto(func(c *config) *time.Duration { return &c.IdempotencyWait })},
	{"CLEANUP_INTERVAL", "1m", durationInto(func(c *config) *time.Duration { return &c.CleanupInterval })},
	{"OUTBOX_WEBHOOK_URL", "", func(c *config, v string) error {
		if v == "log" {
			c.OutboxLogOnly = true
			return nil
		}
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("not an absolute http or https URL, or log")
		}
		c.OutboxWebhookURL = v
		return nil
	}},
	{"OUTBOX_POLL_INTERVAL", "500ms", durationInto(func(c *config) *time.Duration { return &c.OutboxPollInterval })},
	{"OUTBOX_BATCH_SIZE", "100", intInto(1, 1000, func(c *config) *int { return &c.OutboxBatchSize })},
	{"OUTBOX_CONCURRENCY", "16", intInto(1, 256, func(c *config) *int { return &c.OutboxConcurrency })},
	{"OUTBOX_RETENTION", "168h", durationInto(func(c *config) *time.Duration { return &c.OutboxRetention })},
	{"OUTBOX_WEBHOOK_SECRET", "", func(c *config, v string) error {
		keys, err := outbox.ParseWebhookSecrets(v)
		if err != nil {
			// The value is a secret: never repeated in the error.
			return errSecret{err}
		}
		c.OutboxSecrets = keys
		return nil
	}},
	{"OUTBOX_MAX_ATTEMPTS", "20", intInto(1, 1000, func(c *config) *int { return &c.OutboxMaxAttempts })},
	{"OUTBOX_CLAIM_TIMEOUT", "1m", durationInto(func(c *config) *time.Duration { return &c.OutboxClaimTimeout })},
	{"OUTBOX_HTTP_TIMEOUT", "10s", durationInto(func(c *config) *time.Duration { return &c.OutboxHTTPTimeout })},
	{"OUTBOX_BACKOFF_BASE", "1s", durationInto(func(c *config) *time.Duration { return &c.OutboxBackoffBase })},
	{"OUTBOX_BACKOFF_MAX", "15m", durationInto(func(c *config) *time.Duration { return &c.OutboxBackoffMax })},
	{"LOG_LEVEL", "info", func(c *config, v string) error {
		return c.LogLevel.UnmarshalText([]byte(strings.ToLower(v)))
	}},
	{"DB_MAX_CONNS", "0", func(c *config, v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 {
			return fmt.Errorf("not a non-negative integer")
		}
		c.DBMaxConns = int32(n)
		return nil
	}},
	{"DB_STATEMENT_TIMEOUT", "10s", guardInto(func(c *config) *time.Duration { return &c.DBStatementTimeout })},
	{"DB_LOCK_TIMEOUT", "2s", guardInto(func(c *config) *time.Duration { return &c.DBLockTimeout })},
	{"DB_IDLE_IN_TX_TIMEOUT", "30s", guardInto(func(c *config) *time.Duration { return &c.DBIdleInTxTimeout })},
	{"REQUEST_TIMEOUT", "15s", durationInto(func(c *config) *time.Duration { return &c.RequestTimeout })},
	{"SHUTDOWN_TIMEOUT", "20s", durationInto(func(c *config) *time.Duration { return &c.ShutdownTimeout })},
	{"SHUTDOWN_DRAIN", "0s", func(c *config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("not a non-negative duration such as 0s or 10s")
		}
		c.ShutdownDrain = d
		return nil
	}},
	{"OTEL_EXPORTER_OTLP_ENDPOINT", "", func(c *config, v string) error {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("not an absolute http or https URL such as http://127.0.0.1:4318")
		}
		c.OTLPEndpoint = v
		return nil
	}},
	{"OTEL_SERVICE_NAME", "ordersvc", func(c *config, v string) error { c.ServiceName = v; return nil }},
	{"PPROF_ADDR", "", func(c *config, v string) error { c.PprofAddr = v; return nil }},
	{"METRICS_ADDR", "", func(c *config, v string) error {
		if _, _, err := net.SplitHostPort(v); err != nil {
			return fmt.Errorf("not a listen address such as :9090 or 127.0.0.1:9090")
		}
		c.MetricsAddr = v
		return nil
	}},
	{"BENCH_DISABLE_IDEMPOTENCY", "", func(c *config, v string) error {
		switch strings.ToLower(v) {
		case "1", "true":
			c.BenchDisableIdempotency = true
		case "0", "false":
		default:
			return fmt.Errorf("must be 1 or 0")
		}
		return nil
	}},
}

// set applies the setting's value from getenv, or its default, to c.
func (s setting) set(c *config, getenv func(string) string) error {
	v := getenv(s.name)
	if v == "" {
		v = s.def
	}
	if v == "" {
		return nil
	}
	if err := s.apply(c, v); err != nil {
		var se errSecret
		if errors.As(err, &se) {
			return fmt.Errorf("%s: %w", s.name, se.err)
		}
		return fmt.Errorf("%s=%q: %w", s.name, v, err)
	}
	return nil
}

// loadConfig parses the environment. needDB is false for commands that do not
// touch the database.
func loadConfig(getenv func(string) string, needDB bool) (config, error) {
	var c config
	for _, s := range settings {
		if err := s.set(&c, getenv); err != nil {
			return c, err
		}
	}
	if needDB && c.DatabaseURL == "" {
		return c, fmt.Errorf("DATABASE_URL is required, e.g. postgres://user:pass@localhost:5432/orders")
	}
	if c.MigrateDatabaseURL == "" {
		c.MigrateDatabaseURL = c.DatabaseURL
	}
	return c, c.check()
}

// check refuses settings that contradict each other.
func (c config) check() error {
	if c.IdempotencyWait >= c.DBStatementTimeout {
		return fmt.Errorf("IDEMPOTENCY_WAIT (%s) must be shorter than DB_STATEMENT_TIMEOUT (%s)", c.IdempotencyWait, c.DBStatementTimeout)
	}
	if c.RequestTimeout <= c.IdempotencyWait {
		return fmt.Errorf("REQUEST_TIMEOUT (%s) must be longer than IDEMPOTENCY_WAIT (%s)", c.RequestTimeout, c.IdempotencyWait)
	}
	if c.OutboxClaimTimeout < 2*c.OutboxHTTPTimeout {
		return fmt.Errorf("OUTBOX_CLAIM_TIMEOUT (%s) must be at least twice OUTBOX_HTTP_TIMEOUT (%s)", c.OutboxClaimTimeout, c.OutboxHTTPTimeout)
	}
	if c.OutboxBackoffMax < c.OutboxBackoffBase {
		return fmt.Errorf("OUTBOX_BACKOFF_MAX (%s) must not be shorter than OUTBOX_BACKOFF_BASE (%s)", c.OutboxBackoffMax, c.OutboxBackoffBase)
	}
	return nil
}
