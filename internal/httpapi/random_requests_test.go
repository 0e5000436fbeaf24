package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// TestRandomRequestsNeverAnswer5xx sends a few thousand random requests
// (bodies, headers, paths, methods; from a seeded generator: each client's
// draws follow RANDOM_REQUESTS_SEED, but the clients run at once and learn
// from each other's answers, so a run is not replayed exactly) on every
// operation of the table, with bodies made from the document
// (random_generator_test.go), to the running service, as several clients at
// once, from the state requests.http's flow leaves (newGenerator), and
// checks the contract's promise that no input a caller sends answers 5xx,
// that every error is a problem document, and that nothing is left
// half-written: every change has its event, every order its lines and
// total, the stock of every product newGenerator made or requests.http
// created its adjustments and orders, and no idempotency record is left in
// progress (ADR 0010).
func TestRandomRequestsNeverAnswer5xx(t *testing.T) {
	t.Parallel()
	seed := uint64(20261203)
	if s := os.Getenv("RANDOM_REQUESTS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("RANDOM_REQUESTS_SEED: %v", err)
		}
		seed = v
	}
	const clients, perClient = 4, 750
	e := httpkit.New(t)
	g, initial := newGenerator(t, e)

	tl := &tally{statuses: map[int]int{}, succeeded: map[string]int{}}
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			for i := range perClient {
				req := g.request(rng)
				status, header, body, err := send(e, req)
				if status >= 200 && status < 300 {
					g.learn(req, header)
				}
				tl.record(fmt.Sprintf("client %d request %d %s", c, i, req), req, status, header, body, err)
			}
		}()
	}
	wg.Wait()

	t.Logf("seed %d: %d requests from %d clients; statuses %s (%d of the 400s from net/http's framing checks; %d bodies reset before their answer was read)",
		seed, clients*perClient, clients, tl.statusLine(), tl.framing, tl.resets)
	t.Logf("2xx by operation: %s", g.reached(tl.succeeded))
	for i, b := range tl.bad {
		if i == 20 {
			t.Errorf("… and %d more", len(tl.bad)-20)
			break
		}
		t.Error(b)
	}
	nothingHalfWritten(t, e, initial)
}

// tally counts the answers of the random requests and keeps the bad ones.
type tally struct {
	mu              sync.Mutex
	statuses        map[int]int
	succeeded       map[string]int // 2xx by operation; "" for a request whose method or path was replaced
	bad             []string
	framing, resets int
}

// record classifies one answer: a 5xx, a transport error or a 4xx that is
// not a problem document is bad; net/http's own refusals of a request's
// framing, and a reset that overtook such a refusal, are counted apart.
func (tl *tally) record(what string, req randomRequest, status int, header http.Header, body []byte, err error) {
	ct := header.Get("Content-Type")
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.statuses[status]++
	if status >= 200 && status < 300 {
		tl.succeeded[req.op]++
	}
	switch {
	case err != nil && errors.Is(err, syscall.ECONNRESET) && (len(req.body) > 256<<10 || len(req.body) > 0 && req.badFraming()):
		// net/http answered without reading the body (one this large, or
		// any body of a request whose framing it refuses) and closed; the
		// reset overtook its answer.
		tl.resets++
	case err != nil:
		tl.bad = append(tl.bad, fmt.Sprintf("%s: %v", what, err))
	case status >= 500:
		tl.bad = append(tl.bad, fmt.Sprintf("%s: %d %s", what, status, body))
	case refusedByHTTP(status, ct, body):
		tl.framing++
	case status >= 400 && req.method != "HEAD" && ct != "application/problem+json":
		tl.bad = append(tl.bad, fmt.Sprintf("%s: %d with Content-Type %q", what, status, ct))
	}
}

// statusLine is the count of each status, in order: "200×1258 201×235 …".
func (tl *tally) statusLine() string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(tl.statuses)) {
		out = append(out, fmt.Sprintf("%d×%d", k, tl.statuses[k]))
	}
	return strings.Join(out, " ")
}

// nothingHalfWritten checks what the random requests left: every invariant
// api check knows (store.Check, whatever kinds it has), then what it does
// not look at, for every table at once (writtenWithoutEvent,
// controlCharacters), and the few rules of one table each below. A new
// operation adds a row here only for a rule of its own that none of them
// sees; the requests need no edit.
func nothingHalfWritten(t *testing.T, e *httpkit.Env, initial map[string]int64) {
	t.Helper()
	e.Check()
	checks := map[string]string{
		"orders without lines":                     `SELECT count(*) FROM orders o WHERE NOT EXISTS (SELECT 1 FROM order_lines l WHERE l.order_id = o.id)`,
		"cancelled orders without order.cancelled": `SELECT count(*) FROM orders o WHERE status = 'cancelled' AND NOT EXISTS (SELECT 1 FROM outbox_events e WHERE e.type = 'order.cancelled' AND e.aggregate_id = o.id)`,
		"shipped orders without order.shipped":     `SELECT count(*) FROM orders o WHERE status = 'shipped' AND NOT EXISTS (SELECT 1 FROM outbox_events e WHERE e.type = 'order.shipped' AND e.aggregate_id = o.id)`,
		"payments without payment.recorded":        `SELECT (SELECT count(*) FROM payments) - (SELECT count(*) FROM outbox_events WHERE type = 'payment.recorded')`,
		"adjustments without stock.adjusted":       `SELECT (SELECT count(*) FROM stock_adjustments) - (SELECT count(*) FROM outbox_events WHERE type = 'stock.adjusted')`,
		"idempotency records left in progress":     `SELECT count(*) FROM idempotency_keys WHERE state <> 'completed'`,
	}
	for _, what := range slices.Sorted(maps.Keys(checks)) {
		if n := e.QueryInt(checks[what]); n != 0 {
			t.Errorf("%s: %d", what, n)
		}
	}
	writtenWithoutEvent(t, e)
	controlCharacters(t, e)
	for id, start := range initial {
		want := start + e.QueryInt(`SELECT coalesce(sum(delta), 0) FROM stock_adjustments WHERE product_id = $1`, id) -
			e.QueryInt(`SELECT coalesce(sum(l.quantity), 0) FROM order_lines l JOIN orders o ON o.id = l.order_id
				WHERE l.product_id = $1 AND o.status <> 'cancelled'`, id)
		if got := stockOf(e, id); got != want {
			t.Errorf("product %s: stock %d, but its adjustments and orders say %d", id, got, want)
		}
	}
}

// tablesWrittenWithoutEvent are the tables whose rows a transaction may
// write without appending an event: the callers and their tokens, the
// catalogue (a product and its first stock level), the idempotency records,
// the outbox itself and goose's own.
var tablesWrittenWithoutEvent = []string{"actors", "api_tokens", "products", "stock_levels", "idempotency_keys", "outbox_events", "goose_db_version", "goose_lock"}

// writtenWithoutEvent fails for every row of every other table of the
// schema, a table added later included, whose last writer appended no
// event: the transactional outbox's promise (docs/events.md), seen from the
// rows. A row's xmin is the transaction that last wrote it, and an event
// appended by that transaction carries the same xmin; the random requests
// run no dispatcher, so no event is written again after its transaction.
// What it cannot see: a write without its event to a table of
// tablesWrittenWithoutEvent (an actor's balance, a stock level: the rows of
// one table each above cover those); and a use case that wrote inside a
// savepoint (a subtransaction has an xid of its own) would fail it though
// it appended its event: none does.
func writtenWithoutEvent(t *testing.T, e *httpkit.Env) {
	t.Helper()
	rows, err := e.Pool.Query(t.Context(), `SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND NOT tablename = ANY($1) ORDER BY 1`, tablesWrittenWithoutEvent)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	for _, want := range []string{"order_lines", "orders", "payments", "stock_adjustments"} {
		if err != nil || !slices.Contains(tables, want) {
			t.Fatalf("tables written with an event: %v (%v), without %s: the search went wrong", tables, err, want)
		}
	}
	for _, tbl := range tables {
		q := fmt.Sprintf(`SELECT count(*) FROM %s r WHERE NOT EXISTS (SELECT 1 FROM outbox_events e WHERE e.xmin = r.xmin)`, pgx.Identifier{tbl}.Sanitize())
		if n := e.QueryInt(q); n != 0 {
			t.Errorf("%s: %d rows written by a transaction that appended no event", tbl, n)
		}
	}
}

// controlCharacters fails for every text column of the schema, one added
// later included, that holds a control character: every name and reason a
// caller sends is one line of text (domain.ParseName).
func controlCharacters(t *testing.T, e *httpkit.Env) {
	t.Helper()
	rows, err := e.Pool.Query(t.Context(), `SELECT table_name, column_name FROM information_schema.columns
		WHERE table_schema = 'public' AND data_type IN ('text', 'character varying') ORDER BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	columns, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Table, Column string }])
	if err != nil || len(columns) < 5 {
		t.Fatalf("text columns: %v (%v)", columns, err)
	}
	for _, c := range columns {
		q := fmt.Sprintf(`SELECT count(*) FROM %s WHERE %s ~ '[[:cntrl:]]'`, pgx.Identifier{c.Table}.Sanitize(), pgx.Identifier{c.Column}.Sanitize())
		if n := e.QueryInt(q); n != 0 {
			t.Errorf("%s.%s: %d values holding a control character", c.Table, c.Column, n)
		}
	}
}

// reached says how deep the requests reached: the 2xx answers by operation
// of the table.
func (g *generator) reached(succeeded map[string]int) string {
	var out []string
	for _, rt := range g.routes {
		out = append(out, fmt.Sprintf("%s×%d", rt.Name, succeeded[rt.Name]))
	}
	return strings.Join(out, " ")
}

// newGenerator makes what the requests act on: the callers, actors to
// deactivate, three products stocked for every order and an order of each;
// then the state the documented flow leaves, with no seed of its own for any
// operation. It sends requests.http once, in order (runRequestsFile; without
// the README's calls, since the file promises to run on a fresh stack), and
// learns from each success as from a random one (generator.learn), so the
// products, orders and ETags the file wrote are known from the first
// request. It is the state the file ends in, not each one it passes
// through: an operation that needs a resource in some state has its
// examples leave one there (an operation on cancelled orders has its
// examples end with one cancelled). The file's Alice is the generator's customer, so the
// random requests act on her orders as their owner; its Bob is the customer
// to deactivate. The initial stock returned is that of the three products
// and of each one the file created (the stock its creation sent): the
// end-of-run checks hold each to its adjustments and orders.
func newGenerator(t *testing.T, e *httpkit.Env) (*generator, map[string]int64) {
	t.Helper()
	bob := e.NewCustomer(0)
	g := &generator{
		staff:    e.Staff.Token,
		customer: e.NewCustomer(1_000_000_00),
		routes:   tableRoutes(t),
		// Actors to deactivate: neither a caller nor the last staff.
		known:  map[string][]string{"actors": {bob.ID, e.NewStaff().ID}},
		seeded: 3,
		etags:  map[string]string{},
	}
	initial := map[string]int64{}
	for i := range 3 {
		id := e.NewProduct(testkit.ProductSpec{PriceCents: 250, Stock: 100_000})
		g.known["products"] = append(g.known["products"], id)
		initial[id] = 100_000
		o := e.PlaceOrder(g.customer.Token, "seed-order-"+strconv.Itoa(i), testkit.Line(id, 1))
		if o.Status != http.StatusCreated {
			t.Fatalf("seed order: %d %s", o.Status, o.Body)
		}
		g.known["orders"] = append(g.known["orders"], o.String("id"))
	}
	vars, reqs := fileVars(t, e, g.customer.Token, bob.ID)
	for _, s := range runRequestsFile(t, newConformance(t, e), vars, reqs, 1) {
		if s.res.Status < 200 || s.res.Status >= 300 {
			continue
		}
		g.learn(randomRequest{method: s.method, path: s.path}, s.res.Header)
		if s.method == http.MethodPost && s.path == "/v1/products" {
			var created struct{ Stock int64 }
			if err := json.Unmarshal([]byte(s.body), &created); err != nil {
				t.Fatalf("requests.http:%d: %v", s.line, err)
			}
			initial[s.res.String("id")] = created.Stock
		}
	}
	return g, initial
}

// randomRequest is one generated request.
type randomRequest struct {
	op           string // the operation's name; "" once its method or path is replaced
	method, path string
	header       http.Header
	body         []byte
}

func (r randomRequest) String() string {
	b := r.body
	if len(b) > 120 {
		b = append(b[:120:120], "…"...)
	}
	return fmt.Sprintf("%s %q %v body %q", r.method, r.path, r.header, b)
}

// send writes the request byte for byte on a connection of its own, so that
// what the generator made is what the server reads: Go's client would
// refuse some of these headers and re-escape some of these paths. The
// connection is kept alive until the answer is read: a server that closes
// with part of a body unread resets the connection, and the reset can
// overtake the answer.
func send(e *httpkit.Env, r randomRequest) (int, http.Header, []byte, error) {
	conn, err := net.Dial("tcp", e.Server.Listener.Addr().String())
	if err != nil {
		return 0, http.Header{}, nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: ordersvc\r\nContent-Length: %d\r\n", r.method, r.path, len(r.body))
	for k, vs := range r.header {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	b.WriteString("\r\n")
	b.Write(r.body)
	// Write while reading, as an HTTP client does: a server may answer
	// before it has read the whole body.
	go func() { _, _ = conn.Write(b.Bytes()) }()
	res, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: r.method})
	if err != nil {
		return 0, http.Header{}, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, body, err
}

// badFraming says whether net/http refuses the request before any handler:
// a path that does not parse as a request URI (a bad escape such as %ZZ)
// or holds a control character, or a control character (not a tab) in a
// header value. It then answers 400 and closes the connection without
// reading the body.
func (r randomRequest) badFraming() bool {
	ctl := func(s string) bool {
		return strings.ContainsFunc(s, func(c rune) bool { return c < 0x20 && c != '\t' || c == 0x7f })
	}
	if _, err := url.ParseRequestURI(r.path); err != nil || ctl(r.path) {
		return true
	}
	for _, vs := range r.header {
		if slices.ContainsFunc(vs, ctl) {
			return true
		}
	}
	return false
}

// refusedByHTTP says whether the answer is net/http's own 400 for a request
// that HTTP/1.1 framing refuses (a control character in a header value, a
// path that does not parse): the server answers it before any handler, in
// plain text, and closes the connection.
func refusedByHTTP(status int, ct string, body []byte) bool {
	return status == http.StatusBadRequest && strings.HasPrefix(ct, "text/plain") && bytes.HasPrefix(body, []byte("400 Bad Request"))
}
