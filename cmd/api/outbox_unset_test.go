package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

// TestReplicaWithoutWebhookURLLeavesEventsToOneWithIt: two replicas on one
// database, one started without OUTBOX_WEBHOOK_URL. That replica runs no
// dispatcher: it warns at start, its scrape shows the backlog and no
// dispatcher, and the events of the orders placed through it stay pending
// until the replica with the URL delivers every one of them. The naive
// variant is the replica that treated an unset URL as "log" (now only the
// explicit OUTBOX_WEBHOOK_URL=log does): it marks the events delivered into
// its log, and the receiver never sees them.
func TestReplicaWithoutWebhookURLLeavesEventsToOneWithIt(t *testing.T) {
	t.Parallel()
	const orders = 5
	run := func(t *testing.T, naive bool) (received int, logs, scrape string) {
		url := testkit.DB(t)
		ctx := context.Background()
		var mu sync.Mutex
		got := map[string]bool{}
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var ev struct {
				Type string `json:"type"`
				Data struct {
					ID string `json:"id"`
				} `json:"data"`
			}
			_ = json.NewDecoder(r.Body).Decode(&ev)
			if ev.Type == "order.placed" {
				mu.Lock()
				got[ev.Data.ID] = true
				mu.Unlock()
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		defer hook.Close()
		base := map[string]string{"DATABASE_URL": url, "HTTP_ADDR": "127.0.0.1:0", "OUTBOX_POLL_INTERVAL": "10ms",
			"LOG_LEVEL": "warn", "SHUTDOWN_TIMEOUT": "5s"}
		with := func(kv ...string) func(string) string {
			m := map[string]string{}
			for k, v := range base {
				m[k] = v
			}
			for i := 0; i+1 < len(kv); i += 2 {
				m[kv[i]] = kv[i+1]
			}
			return envOf(m)
		}
		start := func(getenv func(string) string, out io.Writer) (addr string, stop func()) {
			sctx, cancel := context.WithCancel(ctx)
			listening := make(chan string, 1)
			done := make(chan error, 1)
			go func() { done <- serve(sctx, getenv, out, listening) }()
			select {
			case addr = <-listening:
			case err := <-done:
				t.Fatalf("serve: %v", err)
			}
			return addr, func() { cancel(); <-done }
		}

		var logA bytes.Buffer
		envA := with() // OUTBOX_WEBHOOK_URL unset
		if naive {
			envA = with("OUTBOX_WEBHOOK_URL", "log") // what an unset URL used to mean
		}
		addrA, stopA := start(envA, io.MultiWriter(t.Output(), &syncWriter{w: &logA}))
		defer stopA()
		staff, customer := newToken(t, envA, "staff", 0), newToken(t, envA, "customer", 1_000_000)
		client := &http.Client{Timeout: 10 * time.Second}
		product := post(t, client, addrA, "/v1/products", staff, `{"sku":"UNSET-1","name":"Mug","price_cents":100,"stock":100}`)
		for i := range orders {
			post(t, client, addrA, "/v1/orders", customer, `{"lines":[{"product_id":"`+product+`","quantity":1}]}`, "Idempotency-Key", fmt.Sprint(i))
		}
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		count := func(sql string) int {
			var n int
			if err := conn.QueryRow(ctx, sql).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if naive {
			// The gate: the naive replica has done what it does.
			waitFor(t, 10*time.Second, "the naive replica to mark the events", func() bool {
				return count(`SELECT count(*) FROM outbox_events WHERE type = 'order.placed' AND state = 'delivered'`) == orders
			})
		}
		res, err := client.Get("http://" + addrA + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		scrape = string(raw)

		_, stopB := start(with("OUTBOX_WEBHOOK_URL", hook.URL), t.Output()) // the replica that delivers
		defer stopB()
		waitFor(t, 20*time.Second, "no event left pending or claimed", func() bool {
			return count(`SELECT count(*) FROM outbox_events WHERE state IN ('pending', 'claimed')`) == 0
		})
		mu.Lock()
		defer mu.Unlock()
		return len(got), logA.String(), scrape
	}

	t.Run("guarded", func(t *testing.T) {
		t.Parallel()
		received, logs, scrape := run(t, false)
		if received != orders {
			t.Errorf("the receiver saw %d of %d order.placed events", received, orders)
		}
		if !strings.Contains(logs, "OUTBOX_WEBHOOK_URL is not set: this process runs no outbox dispatcher") {
			t.Error("no warning at start that this replica runs no dispatcher")
		}
		for _, want := range []string{
			fmt.Sprintf("ordersvc_outbox_pending_events %d\n", orders),
			"ordersvc_outbox_dispatcher_running 0\n",
			"ordersvc_outbox_delivered_total 0\n",
		} {
			if !strings.Contains(scrape, want) {
				t.Errorf("the scrape of the replica without a URL lacks %q", want)
			}
		}
	})
	t.Run("naive unset means log is caught", func(t *testing.T) {
		t.Parallel()
		received, _, _ := run(t, true)
		if received == orders {
			t.Fatal("the naive replica lost nothing: the test cannot tell the two apart")
		}
		t.Logf("naive variant: the receiver saw %d of %d order.placed events; the others were marked delivered in a log", received, orders)
	})
}

// syncWriter serializes writes from the service's goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// newToken creates an actor with `api actor create` and returns its token.
func newToken(t *testing.T, getenv func(string) string, role string, limit int64) string {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"actor", "create", "--name", role, "--role", role,
		"--credit-limit-cents", fmt.Sprint(limit)}, getenv, &out); err != nil {
		t.Fatal(err)
	}
	var a struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(out.Bytes(), &a); err != nil {
		t.Fatal(err)
	}
	return a.Token
}

// post sends a JSON body and returns the created resource's id; anything
// but 201 fails the test.
func post(t *testing.T, client *http.Client, addr, path, token, body string, headers ...string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+addr+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var created struct {
		ID string `json:"id"`
	}
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusCreated || json.Unmarshal(raw, &created) != nil {
		t.Fatalf("POST %s: %d %s", path, res.StatusCode, raw)
	}
	return created.ID
}
