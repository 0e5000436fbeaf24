package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// A process remembers which actor a token belongs to, but never whether it
// may still act: these tests warm that memory on two replicas (two
// services on one database), then deactivate the actor (or delete its
// token) and check that every kind of request is refused at once on both,
// including replays of completed keys and requests that answer without
// reaching the database.

type probe struct {
	name    string
	method  string
	path    string
	body    any
	headers []string
}

func authProbes(product, order string) []probe {
	line := map[string]any{"lines": []map[string]any{{"product_id": product, "quantity": 1}}}
	return []probe{
		{"get product", "GET", "/v1/products/" + product, nil, nil},
		{"list products", "GET", "/v1/products", nil, nil},
		{"get order", "GET", "/v1/orders/" + order, nil, nil},
		{"list orders", "GET", "/v1/orders", nil, nil},
		{"replay a completed key", "POST", "/v1/orders", line, []string{"Idempotency-Key", "warm"}},
		{"place with a fresh key", "POST", "/v1/orders", line, []string{"Idempotency-Key", "fresh"}},
		{"invalid body (no statement)", "POST", "/v1/orders", map[string]any{"lines": "nope"}, []string{"Idempotency-Key", "x"}},
		{"missing key (no statement)", "POST", "/v1/orders", line, nil},
		{"malformed id (no statement)", "GET", "/v1/orders/not-a-uuid", nil, nil},
		{"cancel without If-Match (no statement)", "POST", "/v1/orders/" + order + "/cancel", nil, nil},
	}
}

// warmReplicas makes two services on one database, a customer with one
// token per probe (so that every probe starts from a warm cache entry: a
// refused check evicts its entry), and warms every token on both.
func warmReplicas(t *testing.T) (a, b *httpkit.Env, customer testkit.Actor, probes []probe, tokens []string) {
	a = httpkit.New(t)
	b = httpkit.New(t, testkit.Options{DatabaseURL: a.URL})
	customer = a.NewCustomer(1_000_000)
	product := a.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 1000})
	placed := a.PlaceOrder(customer.Token, "warm", testkit.Line(product, 1))
	if placed.Status != http.StatusCreated {
		t.Fatalf("place: %d %s", placed.Status, placed.Body)
	}
	probes = authProbes(product, placed.String("id"))
	for i := range probes {
		tok := fmt.Sprintf("osk_probe_%s_%d", customer.ID, i)
		a.Exec(`INSERT INTO api_tokens (token_hash, actor_id) VALUES (sha256(convert_to($1, 'UTF8')), $2)`, tok, customer.ID)
		tokens = append(tokens, tok)
	}
	for _, e := range []*httpkit.Env{a, b} {
		for _, tok := range tokens {
			if r := e.Do("GET", probes[0].path, tok, nil); r.Status != http.StatusOK {
				t.Fatalf("warm-up: %d %s", r.Status, r.Body)
			}
		}
	}
	return a, b, customer, probes, tokens
}

func expectRefused(t *testing.T, envs []*httpkit.Env, tokens []string, probes []probe) {
	t.Helper()
	for i, e := range envs {
		for j, p := range probes {
			r := e.Do(p.method, p.path, tokens[j], p.body, p.headers...)
			if r.Status != http.StatusUnauthorized || r.Code() != "unauthenticated" || r.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("replica %d, %s: %d %s", i, p.name, r.Status, r.Body)
			}
			if r.Header.Get("Idempotent-Replayed") != "" || r.Header.Get("ETag") != "" {
				t.Errorf("replica %d, %s: leaked headers %v", i, p.name, r.Header)
			}
		}
	}
}

func TestDeactivationRefusesCachedTokensAtOnceOnEveryReplica(t *testing.T) {
	t.Parallel()
	a, b, customer, probes, tokens := warmReplicas(t)
	if r := a.Do("POST", "/v1/actors/"+customer.ID+"/deactivate", a.Staff.Token, nil); r.Status != http.StatusOK {
		t.Fatalf("deactivate: %d %s", r.Status, r.Body)
	}
	expectRefused(t, []*httpkit.Env{a, b}, tokens, probes)
	if n := a.QueryInt(`SELECT count(*) FROM orders`); n != 1 {
		t.Errorf("%d orders after the deactivation, want the 1 from before", n)
	}
}

func TestDeletedTokenIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	a, b, customer, probes, tokens := warmReplicas(t)
	a.Exec(`DELETE FROM api_tokens WHERE actor_id = $1`, customer.ID)
	expectRefused(t, []*httpkit.Env{a, b}, tokens, probes)
}

// Requests that answer without a statement still answer normally for an
// active actor whose token came from the cache.
func TestCachedTokenAnswersWithoutStatements(t *testing.T) {
	t.Parallel()
	a, _, _, probes, tokens := warmReplicas(t)
	want := map[string]int{
		"invalid body (no statement)":            http.StatusUnprocessableEntity,
		"missing key (no statement)":             http.StatusBadRequest,
		"malformed id (no statement)":            http.StatusNotFound,
		"cancel without If-Match (no statement)": http.StatusPreconditionRequired,
	}
	for i, p := range probes {
		code, ok := want[p.name]
		if !ok {
			continue
		}
		if r := a.Do(p.method, p.path, tokens[i], p.body, p.headers...); r.Status != code {
			t.Errorf("%s: %d %s, want %d", p.name, r.Status, r.Body, code)
		}
	}
}
