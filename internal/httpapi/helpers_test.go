package httpapi_test

import "github.com/ordersvc/ordersvc/internal/testkit"

// placeOrder posts an order of (product id, quantity) pairs with an
// Idempotency-Key.
func placeOrder(e *testkit.Env, token, key string, lines ...any) *testkit.Response {
	var ls []map[string]any
	for i := 0; i+1 < len(lines); i += 2 {
		ls = append(ls, map[string]any{"product_id": lines[i], "quantity": lines[i+1]})
	}
	return e.Do("POST", "/v1/orders", token, map[string]any{"lines": ls}, "Idempotency-Key", key)
}
