package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ordersvc/ordersvc/internal/testkit"
)

// TestAlertRulesUseExportedMetrics: every metric that the alerting rules
// (deploy/prometheus/alerts.yml) and their promtool test name is in the
// scrape of a fresh service, and every label matcher of a rule
// (`{state="acquired"}`) selects a series there, so that a renamed metric
// or label cannot leave an alert that never fires. The rules' logic is
// tested by promtool (.ci/prometheus-check.sh).
func TestAlertRulesUseExportedMetrics(t *testing.T) {
	t.Parallel()
	rules, err := os.ReadFile("../../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("../../deploy/prometheus/alerts_test.yml")
	if err != nil {
		t.Fatal(err)
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
	var base string
	select {
	case addr := <-listening:
		base = "http://" + addr
	case err := <-done:
		t.Fatalf("serve ended before listening: %v", err)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
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

	names := map[string]bool{}
	for _, b := range [][]byte{rules, tests} {
		for _, m := range regexp.MustCompile(`ordersvc_[a-z_]+[a-z]`).FindAll(b, -1) {
			names[string(m)] = true
		}
	}
	if len(names) < 8 {
		t.Fatalf("found only %d metric names in the rules and their test: %v", len(names), names)
	}
	for name := range names {
		if !regexp.MustCompile(`(?m)^` + name + `[{ ]`).MatchString(scrape) {
			t.Errorf("deploy/prometheus names %s, which the service does not export", name)
		}
	}
	matchers := regexp.MustCompile(`(ordersvc_[a-z_]+)\{([a-z_]+)="([^"]+)"\}`).FindAllStringSubmatch(string(rules), -1)
	if len(matchers) == 0 {
		t.Fatal("no label matcher found in the rules")
	}
	for _, m := range matchers {
		if !regexp.MustCompile(`(?m)^` + m[1] + `\{([^}]*,)?` + m[2] + `="` + regexp.QuoteMeta(m[3]) + `"`).MatchString(scrape) {
			t.Errorf("alerts.yml selects %s{%s=%q}, which is no series of the scrape", m[1], m[2], m[3])
		}
	}
	// status=~"5..": the requests counter is labelled with the status code.
	if !strings.Contains(scrape, `ordersvc_http_requests_total{method="GET",route="/metrics",status="200"}`) {
		t.Error(`ordersvc_http_requests_total has no status="200" series for the first scrape: the 5xx rule's label is gone`)
	}
	t.Logf("%d metric names and %d label matchers of deploy/prometheus found in a real scrape", len(names), len(matchers))
}
