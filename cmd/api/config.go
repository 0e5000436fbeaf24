package main

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// config is every setting of the service, parsed once from the environment.
// Nothing else reads the environment.
type config struct {
	DatabaseURL      string
	HTTPAddr         string
	IdempotencyTTL   time.Duration
	IdempotencyWait  time.Duration
	CleanupInterval  time.Duration
	OutboxWebhookURL string
	LogLevel         slog.Level

	DBMaxConns         int32
	DBStatementTimeout time.Duration
	DBLockTimeout      time.Duration
	DBIdleInTxTimeout  time.Duration
	ShutdownTimeout    time.Duration
}

// setting documents one environment variable; the README's configuration
// table lists the same names and defaults.
type setting struct {
	name, def string
	apply     func(c *config, v string) error
}

var settings = []setting{
	{"DATABASE_URL", "", func(c *config, v string) error { c.DatabaseURL = v; return nil }},
	{"HTTP_ADDR", ":8080", func(c *config, v string) error { c.HTTPAddr = v; return nil }},
	{"IDEMPOTENCY_TTL", "24h", durationInto(func(c *config) *time.Duration { return &c.IdempotencyTTL })},
	{"IDEMPOTENCY_WAIT", "5s", durationInto(func(c *config) *time.Duration { return &c.IdempotencyWait })},
	{"CLEANUP_INTERVAL", "1m", durationInto(func(c *config) *time.Duration { return &c.CleanupInterval })},
	{"OUTBOX_WEBHOOK_URL", "", func(c *config, v string) error { c.OutboxWebhookURL = v; return nil }},
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
	{"DB_STATEMENT_TIMEOUT", "10s", durationInto(func(c *config) *time.Duration { return &c.DBStatementTimeout })},
	{"DB_LOCK_TIMEOUT", "2s", durationInto(func(c *config) *time.Duration { return &c.DBLockTimeout })},
	{"DB_IDLE_IN_TX_TIMEOUT", "30s", durationInto(func(c *config) *time.Duration { return &c.DBIdleInTxTimeout })},
	{"SHUTDOWN_TIMEOUT", "20s", durationInto(func(c *config) *time.Duration { return &c.ShutdownTimeout })},
}

func durationInto(field func(*config) *time.Duration) func(*config, string) error {
	return func(c *config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("not a duration such as 5s or 24h")
		}
		if d <= 0 {
			return fmt.Errorf("must be positive")
		}
		*field(c) = d
		return nil
	}
}

// loadConfig parses the environment. needDB is false for commands that do not
// touch the database.
func loadConfig(getenv func(string) string, needDB bool) (config, error) {
	var c config
	for _, s := range settings {
		v := getenv(s.name)
		if v == "" {
			v = s.def
		}
		if v == "" {
			continue
		}
		if err := s.apply(&c, v); err != nil {
			return c, fmt.Errorf("%s=%q: %w", s.name, v, err)
		}
	}
	if needDB && c.DatabaseURL == "" {
		return c, fmt.Errorf("DATABASE_URL is required, e.g. postgres://user:pass@localhost:5432/orders")
	}
	if c.IdempotencyWait >= c.DBStatementTimeout {
		return c, fmt.Errorf("IDEMPOTENCY_WAIT (%s) must be shorter than DB_STATEMENT_TIMEOUT (%s)", c.IdempotencyWait, c.DBStatementTimeout)
	}
	return c, nil
}
