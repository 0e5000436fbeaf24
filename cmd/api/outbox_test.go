package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ordersvc/ordersvc/internal/testkit"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestOutboxSettings(t *testing.T) {
	t.Parallel()
	base := map[string]string{"DATABASE_URL": "postgres://x/y"}
	c, err := loadConfig(envOf(base), true)
	if err != nil {
		t.Fatal(err)
	}
	if c.OutboxPollInterval != 500*time.Millisecond || c.OutboxBatchSize != 100 || c.OutboxMaxAttempts != 20 ||
		c.OutboxClaimTimeout != time.Minute || c.OutboxHTTPTimeout != 10*time.Second ||
		c.OutboxBackoffBase != time.Second || c.OutboxBackoffMax != 15*time.Minute || c.OutboxWebhookURL != "" ||
		c.OutboxConcurrency != 16 || c.OutboxRetention != 168*time.Hour || c.OutboxSecrets != nil {
		t.Errorf("defaults: %+v", c)
	}
	for name, tc := range map[string]struct{ key, value, want string }{
		"relative URL":        {"OUTBOX_WEBHOOK_URL", "/hooks", "OUTBOX_WEBHOOK_URL"},
		"no scheme":           {"OUTBOX_WEBHOOK_URL", "example.test/hooks", "OUTBOX_WEBHOOK_URL"},
		"batch zero":          {"OUTBOX_BATCH_SIZE", "0", "OUTBOX_BATCH_SIZE"},
		"attempts not number": {"OUTBOX_MAX_ATTEMPTS", "many", "OUTBOX_MAX_ATTEMPTS"},
		"claim too short":     {"OUTBOX_CLAIM_TIMEOUT", "15s", "OUTBOX_CLAIM_TIMEOUT"},
		"backoff max < base":  {"OUTBOX_BACKOFF_MAX", "500ms", "OUTBOX_BACKOFF_MAX"},
		"poll not duration":   {"OUTBOX_POLL_INTERVAL", "soon", "OUTBOX_POLL_INTERVAL"},
		"concurrency zero":    {"OUTBOX_CONCURRENCY", "0", "OUTBOX_CONCURRENCY"},
		"concurrency huge":    {"OUTBOX_CONCURRENCY", "10000", "OUTBOX_CONCURRENCY"},
		"retention word":      {"OUTBOX_RETENTION", "a week", "OUTBOX_RETENTION"},
		"secret no prefix":    {"OUTBOX_WEBHOOK_SECRET", "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA==", "OUTBOX_WEBHOOK_SECRET"},
		"secret too short":    {"OUTBOX_WEBHOOK_SECRET", "whsec_c2hvcnQ=", "OUTBOX_WEBHOOK_SECRET"},
	} {
		env := map[string]string{"DATABASE_URL": "postgres://x/y", tc.key: tc.value}
		_, err := loadConfig(envOf(env), true)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", name, err, tc.want)
		}
		if tc.key == "OUTBOX_WEBHOOK_SECRET" && err != nil && strings.Contains(err.Error(), tc.value[len(tc.value)-6:]) {
			t.Errorf("%s: the error repeats the secret: %v", name, err)
		}
	}
	env := map[string]string{"DATABASE_URL": "postgres://x/y", "OUTBOX_WEBHOOK_URL": "https://hooks.example.test/orders"}
	if c, err := loadConfig(envOf(env), true); err != nil || c.OutboxWebhookURL != env["OUTBOX_WEBHOOK_URL"] {
		t.Errorf("a good URL: %v %q", err, c.OutboxWebhookURL)
	}
}

func TestOutboxCommand(t *testing.T) {
	t.Parallel()
	url := testkit.DB(t)
	getenv := envOf(map[string]string{"DATABASE_URL": url})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var ids []string
	rows, err := conn.Query(ctx, `INSERT INTO outbox_events (id, type, aggregate_id, payload, state, attempts, last_error)
		SELECT gen_random_uuid(), 'order.placed', gen_random_uuid(), jsonb_build_object('n', g), 'dead', 20, 'receiver answered 500'
		FROM generate_series(1, 2) g RETURNING id::text`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		ids = append(ids, id)
	}
	rows.Close()
	if _, err := conn.Exec(ctx, `INSERT INTO outbox_events (id, type, aggregate_id, payload) VALUES (gen_random_uuid(), 'order.placed', gen_random_uuid(), '{}')`); err != nil {
		t.Fatal(err)
	}
	cmd := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append([]string{"outbox"}, args...), getenv, &out)
		return out.String(), err
	}

	out, err := cmd("dead")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("outbox dead printed %d lines, want 2:\n%s", len(lines), out)
	}
	for _, l := range lines {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("not a JSON line: %s", l)
		}
		if ev["type"] != "order.placed" || ev["attempts"] != 20.0 || ev["last_error"] != "receiver answered 500" || ev["data"] == nil || ev["occurred_at"] == nil {
			t.Errorf("dead event line: %s", l)
		}
	}

	if out, err := cmd("requeue", ids[0]); err != nil || strings.TrimSpace(out) != `{"requeued":1}` {
		t.Errorf("requeue one: %q, %v", out, err)
	}
	var state string
	var attempts int
	if err := conn.QueryRow(ctx, `SELECT state, attempts FROM outbox_events WHERE id = $1`, ids[0]).Scan(&state, &attempts); err != nil || state != "pending" || attempts != 0 {
		t.Errorf("requeued event: %s, %d attempts, %v", state, attempts, err)
	}
	if _, err := cmd("requeue", ids[0]); err == nil || !strings.Contains(err.Error(), "no dead event") {
		t.Errorf("requeue of an event that is not dead: %v", err)
	}
	for _, bad := range [][]string{{}, {"requeue"}, {"requeue", "nope"}, {"dead", "extra"}, {"purge"}} {
		if _, err := cmd(bad...); err == nil {
			t.Errorf("outbox %v: no error", bad)
		}
	}
	if out, err := cmd("requeue", "--all"); err != nil || strings.TrimSpace(out) != `{"requeued":1}` {
		t.Errorf("requeue --all: %q, %v", out, err)
	}
	if out, err := cmd("dead"); err != nil || out != "" {
		t.Errorf("outbox dead with nothing dead: %q, %v", out, err)
	}
}

// TestServeDeliversEventsPurgesAndStops runs `api serve` with a webhook and
// no signing key: it warns that deliveries are unsigned; an order placed
// over HTTP reaches the receiver as order.placed, an expired idempotency
// record is purged, a delivered event past OUTBOX_RETENTION is deleted, the
// metrics are exposed, and a cancelled context stops the server and the
// workers.
func TestServeDeliversEventsPurgesAndStops(t *testing.T) {
	t.Parallel()
	url := testkit.DB(t)
	var mu sync.Mutex
	var got []map[string]any
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev map[string]any
		_ = json.NewDecoder(r.Body).Decode(&ev)
		mu.Lock()
		got = append(got, ev)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	getenv := envOf(map[string]string{
		"DATABASE_URL": url, "HTTP_ADDR": "127.0.0.1:0", "OUTBOX_WEBHOOK_URL": hook.URL,
		"OUTBOX_POLL_INTERVAL": "50ms", "CLEANUP_INTERVAL": "100ms", "LOG_LEVEL": "warn", "SHUTDOWN_TIMEOUT": "5s",
	})
	ctx := context.Background()
	actor := func(args ...string) (id, token string) {
		var out bytes.Buffer
		if err := run(ctx, append([]string{"actor", "create"}, args...), getenv, &out); err != nil {
			t.Fatal(err)
		}
		var a struct {
			ActorID string `json:"actor_id"`
			Token   string `json:"token"`
		}
		if err := json.Unmarshal(out.Bytes(), &a); err != nil {
			t.Fatal(err)
		}
		return a.ActorID, a.Token
	}
	_, staff := actor("--name", "Staff", "--role", "staff")
	customerID, customer := actor("--name", "Cust", "--role", "customer", "--credit-limit-cents", "100000")

	sctx, stop := context.WithCancel(ctx)
	listening := make(chan string, 1)
	served := make(chan error, 1)
	var logs bytes.Buffer // slog's handler writes one line at a time
	go func() { served <- serve(sctx, getenv, io.MultiWriter(t.Output(), &logs), listening) }()
	base := "http://" + <-listening
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	call := func(method, path, token, body string, headers ...string) (int, map[string]any, string) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		return res.StatusCode, m, string(raw)
	}
	status, product, raw := call("POST", "/v1/products", staff, `{"sku":"SERVE-1","name":"Mug","price_cents":500,"stock":3}`)
	if status != http.StatusCreated {
		t.Fatalf("create product: %d %s", status, raw)
	}
	status, order, raw := call("POST", "/v1/orders", customer, `{"lines":[{"product_id":"`+product["id"].(string)+`","quantity":2}]}`, "Idempotency-Key", "serve-1")
	if status != http.StatusCreated {
		t.Fatalf("place order: %d %s", status, raw)
	}
	waitFor(t, 10*time.Second, "order.placed at the webhook", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range got {
			if data, _ := ev["data"].(map[string]any); ev["type"] == "order.placed" && data["id"] == order["id"] {
				return true
			}
		}
		return false
	})

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE key = 'serve-1'`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the expired record purged", func() bool {
		var n int
		_ = conn.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys WHERE actor_id = $1`, customerID).Scan(&n)
		return n == 0
	})
	if _, err := conn.Exec(ctx, `UPDATE outbox_events SET delivered_at = now() - interval '169 hours' WHERE state = 'delivered'`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the delivered events past retention deleted", func() bool {
		var n int
		_ = conn.QueryRow(ctx, `SELECT count(*) FROM outbox_events WHERE state = 'delivered'`).Scan(&n)
		return n == 0
	})
	status, _, metrics := call("GET", "/metrics", "", "")
	for _, want := range []string{"ordersvc_outbox_delivered_total 1", "ordersvc_idempotency_purged_total 1",
		"ordersvc_outbox_oldest_pending_age_seconds 0", "ordersvc_outbox_deleted_total 1"} {
		if status != http.StatusOK || !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	stop()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop within its shutdown timeout")
	}
	if !strings.Contains(logs.String(), "outbox deliveries are unsigned") {
		t.Error("no warning at start that the deliveries are unsigned")
	}
}

func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
