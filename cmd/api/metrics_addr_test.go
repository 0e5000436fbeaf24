package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordersvc/ordersvc/internal/testkit"
)

// serveWithMetricsAddr starts serve with METRICS_ADDR on a port of its own
// and returns the API's and the metrics listener's addresses, and a stop
// function that ends serve and returns its error.
func serveWithMetricsAddr(t *testing.T, hooks serveHooks) (api, metrics string, stop func() error) {
	t.Helper()
	url := testkit.DB(t)
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan string, 1)
	metricsListening := make(chan string, 1)
	hooks.metricsListening = metricsListening
	done := make(chan error, 1)
	getenv := env("DATABASE_URL", url, "HTTP_ADDR", "127.0.0.1:0", "METRICS_ADDR", "127.0.0.1:0",
		"SHUTDOWN_TIMEOUT", "30s", "LOG_LEVEL", "warn")
	go func() { done <- serve(ctx, getenv, t.Output(), listening, hooks) }()
	for api == "" || metrics == "" {
		select {
		case api = <-listening:
		case metrics = <-metricsListening:
		case err := <-done:
			cancel()
			t.Fatalf("serve ended before listening: %v", err)
		case <-time.After(30 * time.Second):
			cancel()
			t.Fatal("serve did not start listening within 30s")
		}
	}
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("serve did not stop within 60s")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return api, metrics, stop
}

// TestMetricsAddr: with METRICS_ADDR set, GET /metrics is served on that
// listener (and nothing else is), the public port answers it 404 while its
// probes answer as before, and an address that is not host:port is refused
// at start with one line naming the setting.
func TestMetricsAddr(t *testing.T) {
	t.Parallel()
	api, metrics, stop := serveWithMetricsAddr(t, serveHooks{})
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	get := func(base, path string) (int, string) {
		t.Helper()
		res, err := client.Get("http://" + base + path)
		if err != nil {
			t.Fatalf("GET %s%s: %v", base, path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := get(metrics, "/metrics"); code != http.StatusOK || !strings.Contains(body, "ordersvc_build_info{") ||
		!strings.Contains(body, "ordersvc_db_pool_max_connections ") {
		t.Errorf("METRICS_ADDR /metrics: %d, want 200 with the service's metrics:\n%.300s", code, body)
	}
	for _, p := range []string{"/healthz", "/v1/orders", "/"} {
		if code, _ := get(metrics, p); code != http.StatusNotFound {
			t.Errorf("METRICS_ADDR %s: %d, want 404 (the listener serves /metrics only)", p, code)
		}
	}
	if code, body := get(api, "/metrics"); code != http.StatusNotFound || !strings.Contains(body, `"code":"not_found"`) {
		t.Errorf("HTTP_ADDR /metrics with METRICS_ADDR set: %d %s, want 404 not_found", code, body)
	}
	for _, p := range []string{"/healthz", "/livez", "/readyz"} {
		if code, _ := get(api, p); code != http.StatusOK {
			t.Errorf("HTTP_ADDR %s: %d, want 200", p, code)
		}
	}
	client.CloseIdleConnections()
	if err := stop(); err != nil {
		t.Errorf("serve: %v", err)
	}
	if _, err := net.DialTimeout("tcp", metrics, 2*time.Second); err == nil {
		t.Error("the metrics listener still accepts connections after serve returned")
	}

	for _, v := range []string{"9090", "localhost", "http://127.0.0.1:9090"} {
		_, err := loadConfig(env("DATABASE_URL", "postgres://x/y", "METRICS_ADDR", v), true)
		if err == nil || !strings.Contains(err.Error(), "METRICS_ADDR") || strings.Contains(err.Error(), "\n") {
			t.Errorf("METRICS_ADDR=%s: %v, want one line naming METRICS_ADDR", v, err)
		}
	}
}

// gateCollector holds every scrape inside Collect until released, and says
// when the first one got there.
type gateCollector struct {
	desc     *prometheus.Desc
	entered  chan struct{}
	release  chan struct{}
	enterOne sync.Once
}

func (g *gateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *gateCollector) Collect(ch chan<- prometheus.Metric) {
	g.enterOne.Do(func() { close(g.entered) })
	<-g.release
	ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, 1)
}

// scrapeAcrossShutdown holds a scrape of METRICS_ADDR inside the registry,
// stops the service, waits until the metrics listener refuses new
// connections (the stop sequence has reached it), then lets the scrape
// finish, and returns what the scraper got.
func scrapeAcrossShutdown(t *testing.T, closeMetrics bool) (int, string, error) {
	gate := &gateCollector{
		desc:    prometheus.NewDesc("ordersvc_test_gate", "Holds a scrape.", nil, nil),
		entered: make(chan struct{}), release: make(chan struct{}),
	}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(gate.release) }) }
	defer release()
	_, metrics, stop := serveWithMetricsAddr(t, serveHooks{collectors: []prometheus.Collector{gate}, closeMetrics: closeMetrics})

	type scrape struct {
		code int
		body string
		err  error
	}
	got := make(chan scrape, 1)
	go func() {
		client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{}}
		res, err := client.Get("http://" + metrics + "/metrics")
		if err != nil {
			got <- scrape{err: err}
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		got <- scrape{res.StatusCode, string(b), err}
	}()
	select {
	case <-gate.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the scrape did not reach the registry within 30s")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", metrics, time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("the metrics listener still accepts connections 60s after the stop began")
		}
		time.Sleep(20 * time.Millisecond)
	}
	release()
	s := <-got
	if err := <-stopped; err != nil {
		t.Errorf("serve: %v", err)
	}
	return s.code, s.body, s.err
}

// TestMetricsListenerFinishesAScrapeInProgress: when the service stops, the
// METRICS_ADDR listener closes (no new scrape is accepted) and the scrape
// already in progress still gets its complete answer. The naive variant,
// http.Server.Close, cuts it.
func TestMetricsListenerFinishesAScrapeInProgress(t *testing.T) {
	t.Parallel()
	t.Run("guarded", func(t *testing.T) {
		t.Parallel()
		code, body, err := scrapeAcrossShutdown(t, false)
		if err != nil || code != http.StatusOK || !strings.Contains(body, "ordersvc_test_gate 1") || !strings.Contains(body, "ordersvc_build_info{") {
			t.Errorf("the scrape in progress at shutdown: %d, %v, want 200 with every metric:\n%.300s", code, err, body)
		}
	})
	t.Run("naive variant is caught", func(t *testing.T) {
		t.Parallel()
		code, _, err := scrapeAcrossShutdown(t, true)
		if err == nil {
			t.Fatalf("http.Server.Close answered the scrape in progress (%d): this test cannot catch a cut scrape", code)
		}
		t.Logf("the naive variant cut the scrape, as it must: %v", err)
	})
}
