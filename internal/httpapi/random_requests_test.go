package httpapi_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// TestRandomRequestsNeverAnswer5xx sends a few thousand random requests
// (bodies, headers, paths, methods; from a seeded generator, so a failure
// can be replayed with RANDOM_REQUESTS_SEED) to the running service, as
// several clients at once, and checks the contract's promise that no input
// a caller sends answers 5xx, that every error is a problem document, and
// that nothing is left half-written: every change has its event, every
// order its lines and total, every stock its adjustments and orders, and
// no idempotency record is left in progress (ADR 0010).
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
	g := &generator{
		staff:    e.Staff.Token,
		customer: e.NewCustomer(1_000_000_00),
	}
	initial := map[string]int64{}
	for range 3 {
		id := e.NewProduct(testkit.ProductSpec{PriceCents: 250, Stock: 100_000})
		g.products = append(g.products, id)
		initial[id] = 100_000
	}
	for i := range 3 {
		o := e.PlaceOrder(g.customer.Token, "seed-order-"+strconv.Itoa(i), testkit.Line(g.products[i], 1))
		if o.Status != http.StatusCreated {
			t.Fatalf("seed order: %d %s", o.Status, o.Body)
		}
		g.orders = append(g.orders, o.String("id"))
	}

	var mu sync.Mutex
	statuses := map[int]int{}
	var bad []string
	framing, resets := 0, 0
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			for i := range perClient {
				req := g.request(rng)
				status, ct, body, err := send(e, req)
				mu.Lock()
				statuses[status]++
				switch {
				case err != nil && errors.Is(err, syscall.ECONNRESET) && (len(req.body) > 256<<10 || len(req.body) > 0 && req.badFraming()):
					// net/http answered without reading the body (one this
					// large, or any body of a request whose framing it
					// refuses) and closed; the reset overtook its answer.
					resets++
				case err != nil:
					bad = append(bad, fmt.Sprintf("client %d request %d %s: %v", c, i, req, err))
				case status >= 500:
					bad = append(bad, fmt.Sprintf("client %d request %d %s: %d %s", c, i, req, status, body))
				case refusedByHTTP(status, ct, body):
					framing++
				case status >= 400 && req.method != "HEAD" && ct != "application/problem+json":
					bad = append(bad, fmt.Sprintf("client %d request %d %s: %d with Content-Type %q", c, i, req, status, ct))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()

	codes := slices.Sorted(func(yield func(int) bool) {
		for k := range statuses {
			if !yield(k) {
				return
			}
		}
	})
	var tally []string
	for _, k := range codes {
		tally = append(tally, fmt.Sprintf("%d×%d", k, statuses[k]))
	}
	t.Logf("seed %d: %d requests from %d clients; statuses %s (%d of the 400s from net/http's framing checks; %d bodies reset before their answer was read)",
		seed, clients*perClient, clients, strings.Join(tally, " "), framing, resets)
	for i, b := range bad {
		if i == 20 {
			t.Errorf("… and %d more", len(bad)-20)
			break
		}
		t.Error(b)
	}

	// Nothing half-written: every invariant api check knows (store.Check,
	// whatever kinds it has), then what it does not look at.
	e.Check()
	checks := map[string]string{
		"orders without lines":                     `SELECT count(*) FROM orders o WHERE NOT EXISTS (SELECT 1 FROM order_lines l WHERE l.order_id = o.id)`,
		"refunds without refund.recorded":          `SELECT (SELECT count(*) FROM refunds) - (SELECT count(*) FROM outbox_events WHERE type = 'refund.recorded')`,
		"cancelled orders without order.cancelled": `SELECT count(*) FROM orders o WHERE status = 'cancelled' AND NOT EXISTS (SELECT 1 FROM outbox_events e WHERE e.type = 'order.cancelled' AND e.aggregate_id = o.id)`,
		"shipped orders without order.shipped":     `SELECT count(*) FROM orders o WHERE status = 'shipped' AND NOT EXISTS (SELECT 1 FROM outbox_events e WHERE e.type = 'order.shipped' AND e.aggregate_id = o.id)`,
		"payments without payment.recorded":        `SELECT (SELECT count(*) FROM payments) - (SELECT count(*) FROM outbox_events WHERE type = 'payment.recorded')`,
		"adjustments without stock.adjusted":       `SELECT (SELECT count(*) FROM stock_adjustments) - (SELECT count(*) FROM outbox_events WHERE type = 'stock.adjusted')`,
		"idempotency records left in progress":     `SELECT count(*) FROM idempotency_keys WHERE state <> 'completed'`,
		"names or reasons holding a control char":  `SELECT (SELECT count(*) FROM products WHERE name ~ '[[:cntrl:]]') + (SELECT count(*) FROM stock_adjustments WHERE reason ~ '[[:cntrl:]]') + (SELECT count(*) FROM refunds WHERE reason ~ '[[:cntrl:]]')`,
	}
	for what, q := range checks {
		if n := e.QueryInt(q); n != 0 {
			t.Errorf("%s: %d", what, n)
		}
	}
	for id, start := range initial {
		want := start + e.QueryInt(`SELECT coalesce(sum(delta), 0) FROM stock_adjustments WHERE product_id = $1`, id) -
			e.QueryInt(`SELECT coalesce(sum(l.quantity), 0) FROM order_lines l JOIN orders o ON o.id = l.order_id
				WHERE l.product_id = $1 AND o.status <> 'cancelled'`, id)
		if got := stockOf(e, id); got != want {
			t.Errorf("product %s: stock %d, but its adjustments and orders say %d", id, got, want)
		}
	}
}

// randomRequest is one generated request.
type randomRequest struct {
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
func send(e *httpkit.Env, r randomRequest) (int, string, []byte, error) {
	conn, err := net.Dial("tcp", e.Server.Listener.Addr().String())
	if err != nil {
		return 0, "", nil, err
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
		return 0, "", nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Content-Type"), body, err
}

// badFraming says whether net/http refuses the request before any handler:
// a control character in its path or in a header value (one that is not a
// tab). It then answers 400 and closes the connection without reading the
// body.
func (r randomRequest) badFraming() bool {
	ctl := func(s string) bool {
		return strings.ContainsFunc(s, func(c rune) bool { return c < 0x20 && c != '\t' || c == 0x7f })
	}
	if ctl(r.path) {
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

// generator makes random requests around the real API surface: mostly
// well-formed routes with real ids and nearly-valid bodies, so that the
// requests get past the first check and reach deeper ones.
type generator struct {
	staff    string
	customer testkit.Actor
	products []string
	orders   []string
}

func pick[T any](rng *rand.Rand, xs ...T) T { return xs[rng.IntN(len(xs))] }

func (g *generator) request(rng *rand.Rand) randomRequest {
	r := randomRequest{header: http.Header{}}
	product, order := pick(rng, g.products...), pick(rng, g.orders...)
	routes := []struct{ method, path, body, role string }{
		{"POST", "/v1/products", "product", "staff"},
		{"GET", "/v1/products", "", ""},
		{"GET", "/v1/products/" + g.id(rng, product), "", ""},
		{"PATCH", "/v1/products/" + g.id(rng, product), "patch", "staff"},
		{"POST", "/v1/products/" + g.id(rng, product) + "/stock-adjustments", "adjust", "staff"},
		{"POST", "/v1/orders", "order", "customer"},
		{"GET", "/v1/orders", "", ""},
		{"GET", "/v1/orders/" + g.id(rng, order), "", ""},
		{"POST", "/v1/orders/" + g.id(rng, order) + "/cancel", "", "customer"},
		{"POST", "/v1/orders/" + g.id(rng, order) + "/ship", "", "staff"},
		{"POST", "/v1/orders/" + g.id(rng, order) + "/payments", "payment", "customer"},
		{"POST", "/v1/orders/" + g.id(rng, order) + "/refunds", "refund", "staff"},
		{"POST", "/v1/actors/" + uuid.NewString() + "/deactivate", "", "staff"},
	}
	rt := pick(rng, routes...)
	r.method, r.path = rt.method, rt.path
	switch rng.IntN(20) {
	case 0:
		r.method = pick(rng, "GET", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "POST", "TRACE", "FOO")
	case 1:
		r.path = pick(rng, "/", "/v1", "/v1/", "/v2/orders", "/v1/products/", "/v1/orders/%00", "/v1/products/..%2f..%2fetc",
			"/v1/products/"+strings.Repeat("a", 5000), "/v1/products/%ZZ", "/v1/orders/"+product+"/payments/x",
			"/healthz", "/readyz", "/openapi.yaml", "/v1/products/\u00e9", "/v1//orders", "/v1/orders/{id}")
	case 2:
		r.path += pick(rng, "?limit=0", "?limit=101", "?limit=-1", "?limit=abc", "?limit=99999999999999999999",
			"?cursor=%00", "?cursor=AAAA", "?cursor="+strings.Repeat("A", 22), "?limit=5&limit=7", "?cursor=_-_-")
	}

	switch n := rng.IntN(12); {
	case n == 0: // none
	case n == 1:
		r.header.Set("Authorization", pick(rng, "Bearer", "Bearer ", "Bearer osk_nope", "Basic x", "bearer "+g.staff, "Bearer "+g.staff+"x", "Bearer \xff"))
	case n < 9 && rt.role == "staff", n >= 9 && rt.role == "customer":
		r.header.Set("Authorization", "Bearer "+g.staff)
	case n < 9 && rt.role == "customer", n >= 9 && rt.role == "staff":
		r.header.Set("Authorization", "Bearer "+g.customer.Token)
	default:
		r.header.Set("Authorization", "Bearer "+pick(rng, g.staff, g.customer.Token))
	}
	if rng.IntN(4) != 0 {
		r.header.Set("Idempotency-Key", randomKey(rng))
	}
	if rng.IntN(3) != 0 {
		for range 1 + rng.IntN(2) {
			r.header.Add("If-Match", randomTags(rng))
		}
	}
	if rng.IntN(4) == 0 {
		r.header.Set("If-None-Match", randomTags(rng))
	}
	if rng.IntN(2) == 0 {
		r.header.Set("Content-Type", pick(rng, "application/json", "text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin1", ""))
	}
	if rt.body != "" || rng.IntN(5) == 0 {
		r.body = randomBody(rng, rt.body, product)
	}
	return r
}

// id spells a real id in one of the forms a client might, or replaces it.
func (g *generator) id(rng *rand.Rand, real string) string {
	switch rng.IntN(10) {
	case 0:
		return strings.ToUpper(real)
	case 1:
		return uuid.NewString()
	case 2:
		return pick(rng, "x", "0", "00000000-0000-0000-0000-000000000000", "{"+real+"}", "urn:uuid:"+real, strings.ReplaceAll(real, "-", ""), real+"0", "%20"+real)
	}
	return real
}

func randomKey(rng *rand.Rand) string {
	switch rng.IntN(10) {
	case 0:
		return pick(rng, "", " ", `"`, `""`, `"a\qb"`, "k\x7f", "clé", "\xff\xfe", strings.Repeat("k", 256), `"`+strings.Repeat("k", 255)+`"`)
	case 1, 2: // few enough to collide: replays and reuse
		return pick(rng, "k", `"k`) + strconv.Itoa(rng.IntN(30)) + pick(rng, "", `"`)
	}
	return "key-" + strconv.FormatUint(rng.Uint64(), 36)
}

func randomTags(rng *rand.Rand) string {
	var parts []string
	for range 1 + rng.IntN(3) {
		v := strconv.Itoa(1 + rng.IntN(4))
		if rng.IntN(2) == 0 {
			parts = append(parts, `"v`+v+`"`)
			continue
		}
		parts = append(parts, pick(rng, `W/"v`+v+`"`, "v"+v, "*", `"`, `""`, `"v0"`, `"v`+v, `"a,b"`, "", `"v99999999999999999999"`, "\"v\xff\""))
		if rng.IntN(50) == 0 {
			parts = append(parts, "\"v\x01\"") // net/http refuses it before any handler
		}
	}
	return strings.Join(parts, pick(rng, ", ", ",", " ", ",,"))
}

// randomBody is a body for kind that is valid, nearly valid or hostile.
func randomBody(rng *rand.Rand, kind, product string) []byte {
	str := func() string {
		if rng.IntN(2) == 0 {
			return "Mug " + strconv.Itoa(rng.IntN(100))
		}
		return pick(rng, "", "x\u0000y", "tab\there", "\u001b[2J", "\u0085", "é", strings.Repeat("n", 201), "\xed\xa0\x80",
			`a"b`, `\`, "日本", "🙂")
	}
	num := func() string {
		if rng.IntN(2) == 0 {
			return strconv.Itoa(1 + rng.IntN(9))
		}
		return pick(rng, "1", "0", "-1", "5", "1000", "1001", "-1000000", "1000001", "100000000001", "1.5", "1e3", "-0",
			"9223372036854775807", "9223372036854775808", "99999999999999999999", `"5"`, "null", "true", "[]", "{}")
	}
	quote := func(s string) string { return strconv.Quote(s) } // Go escapes; also \x.. which JSON refuses: more variety
	if rng.IntN(5) != 0 {
		quote = func(s string) string {
			var b strings.Builder
			b.WriteByte('"')
			for _, c := range s {
				switch {
				case c == '"' || c == '\\':
					b.WriteString(`\` + string(c))
				case c < 0x20:
					fmt.Fprintf(&b, `\u%04x`, c)
				default:
					b.WriteRune(c)
				}
			}
			b.WriteByte('"')
			return b.String()
		}
	}
	var members []string
	add := func(name, value string) { members = append(members, quote(name)+":"+value) }
	switch kind {
	case "product":
		add("sku", quote(pick(rng, "SKU-"+strconv.Itoa(rng.IntN(1_000_000)), "bad sku", "", strings.Repeat("S", 65))))
		add("name", quote(str()))
		add("price_cents", num())
		add("stock", num())
	case "patch":
		if rng.IntN(2) == 0 {
			add("name", quote(str()))
		}
		if rng.IntN(2) == 0 {
			add("price_cents", num())
		}
	case "adjust":
		add("delta", num())
		add("reason", quote(str()))
	case "payment":
		add("amount_cents", num())
	case "refund":
		add("amount_cents", num())
		add("reason", quote(str()))
	case "order":
		var lines []string
		for range rng.IntN(4) {
			lines = append(lines, fmt.Sprintf(`{"product_id":%s,"quantity":%s}`,
				quote(pick(rng, product, product, strings.ToUpper(product), uuid.NewString(), "x")), num()))
		}
		add("lines", "["+strings.Join(lines, ",")+"]")
	}
	switch rng.IntN(10) {
	case 0: // a member twice
		if len(members) > 0 {
			members = append(members, pick(rng, members...))
		}
	case 1: // a member in another case
		if len(members) > 0 {
			i := rng.IntN(len(members))
			members[i] = strings.ToUpper(members[i][:3]) + members[i][3:]
		}
	case 2: // an unknown member
		add(pick(rng, "version", "id", "stock", "extra", ""), num())
	case 3: // members shuffled
		rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	}
	body := "{" + strings.Join(members, ",") + "}"
	switch rng.IntN(25) {
	case 0:
		body = body[:rng.IntN(len(body)+1)] // truncated
	case 1:
		body = pick(rng, "", " ", "null", "[]", "42", `"x"`, "{}{}", "{'a':1}", "delta=5&reason=x", "\xff\xfe", strings.Repeat("[", 10000))
	case 2:
		b := make([]byte, rng.IntN(64))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		body = string(b)
	case 3:
		body += pick(rng, " {}", "]", "x", "\n", "\x00")
	case 4:
		if rng.IntN(10) == 0 { // rarely: over 1 MiB
			body = `{"reason":"` + strings.Repeat("r", 1<<20) + `"}`
		}
	}
	return []byte(body)
}
