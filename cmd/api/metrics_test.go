package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ordersvc/ordersvc/internal/testkit"
)

// TestDocumentedMetricsArePresentFromTheStart: every metric the README's
// table names is in the scrape of a service that has served nothing but
// that scrape: dashboards and alerts see a zero, not a missing series.
func TestDocumentedMetricsArePresentFromTheStart(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	// Rows of the metrics table: `ordersvc_x` and shorthands `_y` after it.
	var names []string
	for _, row := range regexp.MustCompile("(?m)^\\| `ordersvc_[^|]*\\|").FindAllString(string(readme), -1) {
		var base string
		for _, m := range regexp.MustCompile("`(ordersvc_[a-z_]+|_[a-z_]+)").FindAllStringSubmatch(row, -1) {
			name := m[1]
			if strings.HasPrefix(name, "_") {
				name = base + name
			} else {
				// the family prefix for the shorthands: up to the last word
				base = name[:strings.LastIndex(strings.TrimSuffix(strings.TrimSuffix(name, "_total"), "_seconds"), "_")]
			}
			names = append(names, name)
		}
	}
	if len(names) < 15 {
		t.Fatalf("found only %d metrics in the README's table: %v", len(names), names)
	}

	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan string, 1)
	done := make(chan error, 1)
	getenv := env("DATABASE_URL", testkit.DB(t), "HTTP_ADDR", "127.0.0.1:0", "LOG_LEVEL", "error")
	go func() { done <- serve(ctx, getenv, t.Output(), listening) }()
	defer func() {
		cancel()
		<-done
	}()
	base := "http://" + <-listening
	client := &http.Client{Timeout: 10 * time.Second}
	var scrape string
	for range 2 { // the second scrape sees the first as a request
		res, err := client.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		scrape = string(b)
	}
	for _, name := range names {
		if !regexp.MustCompile(`(?m)^` + name + `(_bucket)?[{ ]`).MatchString(scrape) {
			t.Errorf("%s is documented but not in the scrape of a fresh service", name)
		}
	}
	for _, series := range []string{
		`ordersvc_tx_retries_total{sqlstate="40001"} 0`,
		`ordersvc_idempotency_conflicts_total{code="idempotency_in_progress"} 0`,
		`ordersvc_outbox_failed_total{kind="permanent"} 0`,
		`ordersvc_db_pool_empty_acquires_total `,
		`ordersvc_db_pool_connections{state="acquired"} `,
	} {
		if !strings.Contains(scrape, series) {
			t.Errorf("the scrape lacks %s", series)
		}
	}
	// ordersvc_build_info names the build from the first scrape on.
	build := regexp.MustCompile(`(?m)^ordersvc_build_info\{goversion="` + regexp.QuoteMeta(runtime.Version()) + `",revision="([^"]+)",version="([^"]+)"\} 1$`)
	if m := build.FindStringSubmatch(scrape); m == nil {
		t.Errorf("no ordersvc_build_info{goversion=%q,revision,version} 1 in the scrape", runtime.Version())
	} else {
		t.Logf("ordersvc_build_info: version %s, revision %s", m[2], m[1])
	}
	// The latency buckets reach twice REQUEST_TIMEOUT's default, so that a
	// request that ran into its deadline is told apart from a slow one.
	c, err := loadConfig(env("DATABASE_URL", "postgres://x/y"), true)
	if err != nil {
		t.Fatal(err)
	}
	le := fmt.Sprintf(`le="%g"`, (2 * c.RequestTimeout).Seconds())
	if !strings.Contains(scrape, `ordersvc_http_request_duration_seconds_bucket{method="GET",route="/metrics",`+le+`}`) {
		t.Errorf("the latency histogram has no bucket %s (twice REQUEST_TIMEOUT's default %s)", le, c.RequestTimeout)
	}
	t.Logf("%d documented metrics present", len(names))
}
