package faults_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func orderBody(product string, qty int) string {
	return fmt.Sprintf(`{"lines":[{"product_id":%q,"quantity":%d}]}`, product, qty)
}

// TestClientDisconnectThenRetryYieldsOneOrder: a client sends an order and
// hangs up at once, before any answer, at a range of moments. Its retry with
// the same key then yields exactly one order (EXT.IDEMPOTENCY.REPLAY.001:
// "Simulate a lost response followed by retry").
//
// Patterns and rule ids: docs/patterns.md.
func TestClientDisconnectThenRetryYieldsOneOrder(t *testing.T) {
	t.Parallel()
	e := httpkit.New(t)
	e.CheckAtEnd()
	customer := e.NewCustomer(1_000_000_000)
	product := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 100_000})
	addr := strings.TrimPrefix(e.Server.URL, "http://")
	const keys = 30
	for i := 0; i < keys; i++ {
		key := fmt.Sprintf("disconnect-%d", i)
		body := orderBody(product, 1)
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST /v1/orders HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nIdempotency-Key: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			customer.Token, key, len(body), body)
		time.Sleep(time.Duration(i%6) * time.Millisecond) // hang up at different points of the work
		_ = conn.Close()

		res := e.Do("POST", "/v1/orders", customer.Token, body, "Idempotency-Key", key)
		if res.Status != http.StatusCreated {
			t.Fatalf("retry of %s: %d %s", key, res.Status, res.Body)
		}
	}
	// Wait for every handler, those of the dropped connections included:
	// Close returns once all outstanding requests have completed.
	e.Server.Close()
	orders := e.QueryInt(`SELECT count(*) FROM orders WHERE customer_id = $1`, customer.ID)
	records := e.QueryInt(`SELECT count(*) FROM idempotency_keys WHERE actor_id = $1`, customer.ID)
	sold := e.QueryInt(`SELECT 100000 - stock FROM stock_levels WHERE product_id = $1`, product)
	t.Logf("keys %d, orders %d, idempotency records %d, units taken %d", keys, orders, records, sold)
	if orders != keys || records != keys || sold != keys {
		t.Fatalf("%d keys gave %d orders, %d records and %d units taken; want one of each per key", keys, orders, records, sold)
	}
}

// TestSIGKILLUnderLoadLosesNothingHalfDone: the real binary takes orders from
// 8 clients and is killed with SIGKILL mid-load, then started again. No order
// is partial, stock adds up, every acknowledged key replays its own order, and
// a retry of every unacknowledged key yields exactly one order.
func TestSIGKILLUnderLoadLosesNothingHalfDone(t *testing.T) {
	t.Parallel()
	bin := buildAPI(t)
	dbURL := testkit.DB(t)
	env := append([]string{"DATABASE_URL=" + dbURL, "LOG_LEVEL=warn", "DB_MAX_CONNS=8"}, patientWaits...)

	staff := actorCreate(t, bin, env, "staff")
	customer := actorCreate(t, bin, env, "customer")
	srv := startAPI(t, bin, env)
	const stock = 1_000_000
	res := call(t, srv.base, "POST", "/v1/products", staff, `{"sku":"KILL-1","name":"Kill test","price_cents":1,"stock":1000000}`, "")
	product := res.json["id"].(string)

	var mu sync.Mutex
	acked := map[string]string{}     // key -> order id
	attempted := map[string]string{} // key -> body
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Timeout: 30 * time.Second}
			for i := 0; ctx.Err() == nil && i < 100_000; i++ {
				key, body := fmt.Sprintf("w%d-%d", w, i), orderBody(product, 1+i%3)
				mu.Lock()
				attempted[key] = body
				mu.Unlock()
				r, err := send(client, srv.base, "POST", "/v1/orders", customer, body, key)
				if err != nil {
					return // the server is gone
				}
				if r.status == http.StatusCreated {
					mu.Lock()
					acked[key] = r.json["id"].(string)
					mu.Unlock()
				}
			}
		}()
	}
	// The kill comes once the load runs (some orders acknowledged, the
	// clients still sending), however long the machine takes to get there.
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 50 {
			break
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("only %d orders acknowledged within 60 s: the load did not run", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = srv.cmd.Wait()
	stop()
	wg.Wait()
	t.Logf("killed after %d requests, %d acknowledged", len(attempted), len(acked))

	srv = startAPI(t, bin, env)
	client := &http.Client{Timeout: 10 * time.Second}
	replayed, retried := 0, 0
	for key, body := range attempted {
		r, err := send(client, srv.base, "POST", "/v1/orders", customer, body, key)
		if err != nil || r.status != http.StatusCreated {
			t.Fatalf("retry %s after restart: %v %d %s", key, err, r.status, r.body)
		}
		if order, ok := acked[key]; ok {
			if r.header.Get("Idempotent-Replayed") != "true" || r.json["id"] != order {
				t.Fatalf("acknowledged key %s did not replay its order %s: %s", key, order, r.body)
			}
			replayed++
		} else {
			retried++
		}
	}
	t.Logf("after restart: %d acknowledged keys replayed their order, %d unacknowledged keys retried", replayed, retried)

	db := dbConn(t, dbURL)
	var orders, noLines, units, taken, records int64
	q := func(sql string, dst *int64) {
		if err := db.QueryRow(context.Background(), sql).Scan(dst); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	q(`SELECT count(*) FROM orders`, &orders)
	q(`SELECT count(*) FROM orders o WHERE NOT EXISTS (SELECT 1 FROM order_lines l WHERE l.order_id = o.id)`, &noLines)
	q(`SELECT coalesce(sum(quantity), 0) FROM order_lines`, &units)
	q(fmt.Sprintf(`SELECT %d - stock FROM stock_levels`, stock), &taken)
	q(`SELECT count(*) FROM idempotency_keys WHERE operation = 'placeOrder'`, &records)
	t.Logf("after restart: %d orders, %d without lines, %d units on orders, %d units taken from stock, %d keys recorded", orders, noLines, units, taken, records)
	if noLines != 0 {
		t.Errorf("%d orders have no lines: a partial order survived the kill", noLines)
	}
	if units != taken {
		t.Errorf("orders hold %d units but stock went down by %d", units, taken)
	}
	if orders != records {
		t.Errorf("%d orders but %d idempotency records: an order without its key, or a key without its order", orders, records)
	}
	// The operator's command agrees: every invariant and derived value holds.
	check := exec.Command(bin, "check")
	check.Env = append(os.Environ(), env...)
	if out, err := check.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "ok: all ") {
		t.Errorf("api check after the kill: %v\n%s", err, out)
	}
}

// TestDatabaseOutageAnswers503ThenRecovers: the connection to PostgreSQL is
// cut (a proxy stops, as a stopped server would). While it is down, requests
// get a 503 problem and /readyz fails; once it is back, the same service
// answers again without a restart.
func TestDatabaseOutageAnswers503ThenRecovers(t *testing.T) {
	t.Parallel()
	url := testkit.DB(t)
	proxy := testkit.NewProxy(t, testkit.HostPort(t, url))
	e := httpkit.New(t, testkit.Options{DatabaseURL: proxy.Via(url)})
	e.CheckAtEnd()
	customer := e.NewCustomer(1_000_000)
	product := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 1000})
	if r := e.Do("POST", "/v1/orders", customer.Token, orderBody(product, 1), "Idempotency-Key", "before"); r.Status != http.StatusCreated {
		t.Fatalf("before the outage: %d %s", r.Status, r.Body)
	}

	proxy.Stop()
	for i := 0; i < 3; i++ {
		start := time.Now()
		r := e.Do("POST", "/v1/orders", customer.Token, orderBody(product, 1), "Idempotency-Key", fmt.Sprintf("during-%d", i))
		t.Logf("during the outage: %d %s in %s", r.Status, r.Code(), time.Since(start).Round(time.Millisecond))
		if r.Status != http.StatusServiceUnavailable || r.Code() != "unavailable" || r.Header.Get("Retry-After") == "" {
			t.Fatalf("during the outage: want a 503 unavailable problem with Retry-After, got %d %s", r.Status, r.Body)
		}
		if bytes.Contains(r.Body, []byte("dial")) || bytes.Contains(r.Body, []byte("127.0.0.1")) {
			t.Fatalf("the 503 body leaks internals: %s", r.Body)
		}
	}
	if r := e.Do("GET", "/readyz", "", nil); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("/readyz during the outage: %d", r.Status)
	}

	proxy.Start()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := e.Do("POST", "/v1/orders", customer.Token, orderBody(product, 1), "Idempotency-Key", "after")
		if r.Status == http.StatusCreated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the service did not recover after the database came back: %d %s", r.Status, r.Body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r := e.Do("GET", "/readyz", "", nil); r.Status != http.StatusOK {
		t.Fatalf("/readyz after the outage: %d", r.Status)
	}
	if n := e.QueryInt(`SELECT count(*) FROM orders`); n != 2 {
		t.Fatalf("%d orders, want the one before and the one after the outage", n)
	}
}

// ---- helpers for the out-of-process server

// patientWaits are settings for a binary under a test's load: its clients
// queue on one product row and on one key, and on a loaded machine those
// waits last seconds. With the service's defaults (a 2 s lock timeout, a 5 s
// key wait) slowness would turn into 503 and 409 answers that these tests
// are not about.
var patientWaits = []string{"DB_STATEMENT_TIMEOUT=30s", "DB_LOCK_TIMEOUT=10s", "IDEMPOTENCY_WAIT=10s", "REQUEST_TIMEOUT=30s"}

// buildAPI returns the api binary, built once for the package's tests.
func buildAPI(t *testing.T) string {
	t.Helper()
	return testkit.Binary(t, "github.com/ordersvc/ordersvc/cmd/api")
}

func actorCreate(t *testing.T, bin string, env []string, role string) string {
	t.Helper()
	cmd := exec.Command(bin, "actor", "create", "--name", role, "--role", role, "--credit-limit-cents", "1000000000")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("actor create: %v", err)
	}
	var v struct{ Token string }
	if err := json.Unmarshal(out, &v); err != nil || v.Token == "" {
		t.Fatalf("actor create printed %q: %v", out, err)
	}
	return v.Token
}

type apiProcess struct {
	cmd  *exec.Cmd
	base string
}

// startAPI starts `api serve` on a free port and waits until /readyz answers.
func startAPI(t *testing.T, bin string, env []string) *apiProcess {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(append(os.Environ(), env...), "HTTP_ADDR="+addr)
	stderr := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		if t.Failed() {
			t.Logf("api output:\n%s", lastLines(stderr.String(), 30))
		}
	})
	p := &apiProcess{cmd: cmd, base: "http://" + addr}
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := http.Get(p.base + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("api did not become ready: %v\n%s", err, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

type reply struct {
	status int
	header http.Header
	body   []byte
	json   map[string]any
}

func send(client *http.Client, base, method, path, token, body, key string) (*reply, error) {
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(bufio.NewReader(res.Body)); err != nil {
		return nil, err
	}
	r := &reply{status: res.StatusCode, header: res.Header, body: buf.Bytes()}
	_ = json.Unmarshal(r.body, &r.json)
	return r, nil
}

func call(t *testing.T, base, method, path, token, body, key string) *reply {
	t.Helper()
	r, err := send(http.DefaultClient, base, method, path, token, body, key)
	if err != nil || r.status >= 300 {
		t.Fatalf("%s %s: %v %+v", method, path, err, r)
	}
	return r
}

func dbConn(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}
