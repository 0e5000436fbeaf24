package maintenance_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordersvc/ordersvc/internal/infra/maintenance"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// syncBuffer is a bytes.Buffer that a worker may log into while the test
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestSweepsRecordTheirLastGoodRound: the idempotency purge and the outbox
// retention each set ordersvc_<sweep>_last_success_timestamp_seconds when a
// round runs to its end, also one that had nothing to delete, and leave it
// at 0 while their rounds fail: the gauge that the "purge stalled" alerts
// watch (deploy/prometheus/alerts.yml).
func TestSweepsRecordTheirLastGoodRound(t *testing.T) {
	t.Parallel()
	gauges := []string{"ordersvc_idempotency_purge_last_success_timestamp_seconds", "ordersvc_outbox_retention_last_success_timestamp_seconds"}
	run := func(t *testing.T, broken bool) (*prometheus.Registry, string) {
		t.Helper()
		pool := testkit.GuardedPool(t)
		if broken {
			pool.Close() // every round fails to get a connection
		}
		reg := prometheus.NewRegistry()
		var logs syncBuffer
		log := slog.New(slog.NewTextHandler(&logs, nil))
		purger := maintenance.NewPurger(pool, log, reg, maintenance.PurgeConfig{Interval: time.Hour})
		retention := maintenance.NewOutboxRetention(pool, log, reg, maintenance.RetentionConfig{Interval: time.Hour})
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { purger.Run(ctx) })
		wg.Go(func() { retention.Run(ctx) })
		defer func() { cancel(); wg.Wait() }()
		testkit.WaitFor(t, 30*time.Second, "the first round of both sweeps", func() bool {
			if broken { // a failed round is logged after the gauge was (not) set
				l := logs.String()
				return strings.Contains(l, "msg=\"idempotency purge\"") && strings.Contains(l, "msg=\"outbox retention\"")
			}
			return testkit.Metric(t, reg, gauges[0]) > 0 && testkit.Metric(t, reg, gauges[1]) > 0
		})
		return reg, logs.String()
	}

	before := float64(time.Now().Unix())
	reg, _ := run(t, false)
	for _, g := range gauges {
		if v := testkit.Metric(t, reg, g); v < before || v > float64(time.Now().Unix()+1) {
			t.Errorf("%s = %v after a good round, want the time of that round (≥ %v)", g, v, before)
		}
	}
	reg, logs := run(t, true)
	for _, g := range gauges {
		if v := testkit.Metric(t, reg, g); v != 0 {
			t.Errorf("%s = %v after failed rounds, want 0\n%s", g, v, logs)
		}
	}
}
