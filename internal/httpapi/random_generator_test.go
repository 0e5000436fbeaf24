package httpapi_test

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/httpapi"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// generator makes random requests around the real API surface: the
// operations of the table (httpapi.Operations), mostly on known ids and
// with bodies made from each operation's request schema in openapi.yaml,
// nearly valid or careful, so that the requests get past the first check
// and reach deeper ones. It names no operation: a new one is generated from
// its table entry and its document.
type generator struct {
	staff    string
	customer testkit.Actor
	routes   []route
	mu       sync.Mutex
	// known are ids by collection ("products", "orders", "actors"): the
	// seeded ones, then each one a write created or changed, requests.http's
	// first, as it did (learn), so that the orders placed go on to the
	// operations that act on an order.
	known  map[string][]string
	seeded int // how many of the first ids of a collection valid bodies draw from: the three products (and orders) newGenerator made itself
	// etags are the last ETag seen of each resource (/v1/orders/<id>).
	etags map[string]string
}

// route is an operation as the generator calls it: the role its access
// rule admits ("" for any) and the schema of its JSON request body (nil:
// it takes none).
type route struct {
	httpapi.Operation
	role string
	body *openapi3.Schema
}

// tableRoutes reads the operations table and each operation's request body
// in the document.
func tableRoutes(t *testing.T) []route {
	t.Helper()
	doc, err := apiDoc()
	if err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	var routes []route
	for _, op := range httpapi.Operations() {
		rt := route{Operation: op, role: admitted(op.Name)}
		if item := doc.Paths.Value(op.Route); item != nil {
			if o := item.GetOperation(op.Method); o != nil && o.RequestBody != nil {
				if mt := o.RequestBody.Value.Content.Get("application/json"); mt != nil {
					rt.body = mt.Schema.Value
				}
			}
		}
		routes = append(routes, rt)
	}
	return routes
}

// admitted names the role the operation's access rule admits alone
// ("staff" or "customer"), or "" when it admits both (no access rule).
func admitted(operation string) string {
	switch staff, customer := !httpapi.Refuses(operation, "staff"), !httpapi.Refuses(operation, "customer"); {
	case staff && !customer:
		return "staff"
	case customer && !staff:
		return "customer"
	}
	return ""
}

func pick[T any](rng *rand.Rand, xs ...T) T { return xs[rng.IntN(len(xs))] }

// request is one request on an operation drawn from the table: a third of
// the time a careful one, else one the generator spoils at will (method,
// path, query, credentials, key, preconditions, media type, body).
func (g *generator) request(rng *rand.Rand) randomRequest {
	rt := pick(rng, g.routes...)
	if rt.Method == http.MethodGet && rng.IntN(2) == 0 { // writes more often: that is where a change is half-written
		rt = pick(rng, g.routes...)
	}
	r := randomRequest{op: rt.Name, method: rt.Method, path: g.path(rng, rt.Route), header: http.Header{}}
	if rng.IntN(3) == 0 {
		return g.careful(rng, rt, r)
	}
	product := g.knownID(rng, "products", false)
	switch rng.IntN(20) {
	case 0:
		r.op, r.method = "", pick(rng, "GET", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "POST", "TRACE", "FOO")
	case 1:
		r.op, r.path = "", pick(rng, "/", "/v1", "/v1/", "/v2/orders", "/v1/products/", "/v1/orders/%00", "/v1/products/..%2f..%2fetc",
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
	case n < 9:
		r.header.Set("Authorization", "Bearer "+g.token(rng, rt.role))
	default: // the other role, or either
		r.header.Set("Authorization", "Bearer "+g.token(rng, map[string]string{"staff": "customer", "customer": "staff"}[rt.role]))
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
	if rt.body != nil || rng.IntN(5) == 0 {
		r.body = randomBody(rng, rt.body, g.values(rng, false))
	}
	return r
}

// careful makes r as a careful client sends it: the role the operation
// admits, a fresh key and If-Match where the table says it takes them, and a
// valid JSON body. Only its ids (known or not, as spelled) and its If-Match
// (which versions) may miss. Without these the writes rarely get past every
// check, and the later operations rarely act on a real order.
func (g *generator) careful(rng *rand.Rand, rt route, r randomRequest) randomRequest {
	r.header.Set("Authorization", "Bearer "+g.token(rng, rt.role))
	if rt.Key != "" {
		r.header.Set("Idempotency-Key", "key-"+strconv.FormatUint(rng.Uint64(), 36))
	}
	if rt.IfMatch {
		r.header.Set("If-Match", g.ifMatch(rng, r.path))
	}
	if rt.body != nil {
		r.header.Set("Content-Type", "application/json")
		r.body = []byte("{" + strings.Join(g.values(rng, true).members(rt.body), ",") + "}")
	}
	return r
}

// token is the token of a caller of role, or of either role for "".
func (g *generator) token(rng *rand.Rand, role string) string {
	switch role {
	case "staff":
		return g.staff
	case "customer":
		return g.customer.Token
	}
	return pick(rng, g.staff, g.customer.Token)
}

// values makes the JSON values of a body, with the generator's known ids.
func (g *generator) values(rng *rand.Rand, valid bool) values {
	v := values{rng: rng, valid: valid, known: func(collection string) string { return g.knownID(rng, collection, valid) }, quote: jsonQuote}
	if !valid && rng.IntN(5) == 0 {
		v.quote = strconv.Quote // Go escapes; also \x.. which JSON refuses: more variety
	}
	return v
}

// path is route with each parameter replaced by an id of the collection
// it follows (/v1/orders/{id}/… takes an order): a known one, in one of
// the forms a client might spell it, or an unknown one.
func (g *generator) path(rng *rand.Rand, route string) string {
	parts := strings.Split(route, "/")
	for i, part := range parts {
		if strings.HasPrefix(part, "{") && i > 0 {
			parts[i] = g.id(rng, g.knownID(rng, parts[i-1], false))
		}
	}
	return strings.Join(parts, "/")
}

// knownID is a known id of collection: one of those newGenerator made
// itself if seeded (the products stocked for every order), else a third of
// the time one of those, a third of the time one of the last written, or a
// random one when none is known.
func (g *generator) knownID(rng *rand.Rand, collection string, seeded bool) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	ids := g.known[collection]
	switch n := rng.IntN(3); {
	case seeded, n == 0:
		ids = ids[:min(len(ids), g.seeded)]
	case n == 1: // the last created or written
		ids = ids[max(0, len(ids)-4):]
	}
	if len(ids) == 0 {
		return uuid.NewString()
	}
	return pick(rng, ids...)
}

// learn records what a 2xx answer to a request tells: the resource it
// created (its Location) or wrote to is the newest known of its collection,
// so that the next writes often act on it (an order placed, then paid, then
// cancelled, …); the ETag is that resource's last one.
func (g *generator) learn(r randomRequest, h http.Header) {
	target := cmp.Or(h.Get("Location"), resource(r.path))
	g.mu.Lock()
	defer g.mu.Unlock()
	if tag := h.Get("ETag"); tag != "" {
		g.etags[target] = tag
	}
	dir, last := path.Split(target)
	if id, err := uuid.Parse(last); err == nil && r.method != http.MethodGet {
		g.known[path.Base(dir)] = append(g.known[path.Base(dir)], id.String())
	}
}

// ifMatch is what a careful client sends as If-Match on target: the last
// ETag seen of its resource, if any, among a few guessed ones.
func (g *generator) ifMatch(rng *rand.Rand, target string) string {
	var tags []string
	for range rng.IntN(3) {
		tags = append(tags, `"v`+strconv.Itoa(1+rng.IntN(4))+`"`)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if tag, ok := g.etags[resource(target)]; ok || len(tags) == 0 {
		tags = append(tags, cmp.Or(tag, `"v1"`))
	}
	return strings.Join(tags, ", ")
}

// resource is the resource a request target acts on: /v1/orders/<id> of
// /v1/orders/<id>/cancel.
func resource(target string) string {
	target, _, _ = strings.Cut(target, "?")
	parts := strings.SplitN(target, "/", 5)
	return strings.Join(parts[:min(len(parts), 4)], "/")
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

// randomBody is a body for schema (nil: the operation takes none) that is
// valid, nearly valid or hostile.
func randomBody(rng *rand.Rand, schema *openapi3.Schema, v values) []byte {
	members := v.members(schema)
	add := func(name, value string) { members = append(members, v.quote(name)+":"+value) }
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
		add(pick(rng, "version", "id", "stock", "extra", ""), v.num())
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

// jsonQuote quotes s as JSON does, with no check that s is UTF-8.
func jsonQuote(s string) string {
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

// values makes JSON values for the schemas of the document: integers,
// strings, ids, arrays and objects. Unless valid, each value is valid about
// half the time, an id names a known resource two times out of five, and an
// optional member is there half the time.
type values struct {
	rng   *rand.Rand
	valid bool
	// known is a known id of a collection (a seeded one when valid: stock
	// enough), or a random one: a member product_id names a product.
	known func(collection string) string
	quote func(string) string
}

// members are the members of an object of schema s: each required one, and
// each other one half the time (all of them, when valid, if fewer than
// minProperties).
func (v values) members(s *openapi3.Schema) []string {
	if s == nil {
		return nil
	}
	var members []string
	names := slices.Sorted(maps.Keys(s.Properties))
	for _, name := range names {
		if slices.Contains(s.Required, name) || v.rng.IntN(2) == 0 {
			members = append(members, v.member(s, name))
		}
	}
	if v.valid && uint64(len(members)) < s.MinProps {
		members = members[:0]
		for _, name := range names {
			members = append(members, v.member(s, name))
		}
	}
	return members
}

func (v values) member(s *openapi3.Schema, name string) string {
	return v.quote(name) + ":" + v.value(name, s.Properties[name].Value)
}

// value is a value of schema s for the member name.
func (v values) value(name string, s *openapi3.Schema) string {
	switch {
	case s.Type.Is("string") && s.Format == "uuid":
		known := v.known(strings.TrimSuffix(name, "_id") + "s")
		if v.valid {
			return v.quote(known)
		}
		return v.quote(pick(v.rng, known, known, strings.ToUpper(known), uuid.NewString(), "x"))
	case s.Type.Is("string"):
		return v.quote(v.str(s))
	case s.Type.Is("array") && s.Items != nil:
		n := v.rng.IntN(4)
		if v.valid { // one or two items: two may name the same product
			n = 1 + v.rng.IntN(2)
		}
		items := make([]string, n)
		for i := range items {
			items[i] = v.value(name, s.Items.Value)
		}
		return "[" + strings.Join(items, ",") + "]"
	case s.Type.Is("object"):
		return "{" + strings.Join(v.members(s), ",") + "}"
	}
	return v.num() // an integer, or a type no body has yet: any scalar
}

// str is a valid string half the time (one that matches the SKU pattern
// too), else a hostile one: empty, one over the schema's maxLength, control
// characters, broken UTF-8, characters JSON escapes.
func (v values) str(s *openapi3.Schema) string {
	if v.valid || v.rng.IntN(2) == 0 {
		return "Mug-" + strconv.Itoa(v.rng.IntN(1_000_000))
	}
	long := 201
	if s.MaxLength != nil {
		long = int(*s.MaxLength) + 1
	}
	return pick(v.rng, "", "a b", "x\u0000y", "tab\there", "\u001b[2J", "\u0085", "é", strings.Repeat("n", long), "\xed\xa0\x80",
		`a"b`, `\`, "日本", "🙂")
}

func (v values) num() string {
	if v.valid || v.rng.IntN(2) == 0 {
		return strconv.Itoa(1 + v.rng.IntN(9))
	}
	return pick(v.rng, "1", "0", "-1", "5", "1000", "1001", "-1000000", "1000001", "100000000001", "1.5", "1e3", "-0",
		"9223372036854775807", "9223372036854775808", "99999999999999999999", `"5"`, "null", "true", "[]", "{}")
}
