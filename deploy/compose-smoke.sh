#!/usr/bin/env bash
# Smoke test of the whole stack in docker-compose.yml: build, migrate, serve,
# then a staff member adds a product and a customer places an order, replays it
# with the same Idempotency-Key, /metrics answers and `api check` finds
# nothing. The stack and its
# volumes are removed afterwards, also on failure (then its logs are printed).
#
#   deploy/compose-smoke.sh                                             # registry access
#   eval "$(deploy/build-local-images.sh)" && deploy/compose-smoke.sh   # no registry
#
# Environment: COMPOSE (default: `docker compose` if present, else
# `docker-compose`), COMPOSE_PROJECT_NAME [ordersvc-smoke], API_PORT [empty:
# a free port Docker picks], READY_TIMEOUT seconds after the build [120], and
# the image overrides docker-compose.yml reads (POSTGRES_IMAGE, GO_IMAGE, ...).
set -Eeuo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-ordersvc-smoke}
export API_BIND=127.0.0.1 API_PORT=${API_PORT-}
ready_timeout=${READY_TIMEOUT:-120}

if [ -n "${COMPOSE:-}" ]; then
	read -ra compose <<<"$COMPOSE"
elif docker compose version >/dev/null 2>&1; then
	compose=(docker compose)
else
	compose=(docker-compose)
fi

started=$(date +%s)
passed=0
tmp=$(mktemp -d)
step() { printf '\n== %s\n' "$*"; }
pass() { passed=$((passed + 1)); printf 'ok: %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
cleanup() {
	local rc=$?
	if [ "$rc" != 0 ]; then
		printf '\n== smoke test failed (exit %s); stack state and logs:\n' "$rc" >&2
		"${compose[@]}" ps -a >&2 || true
		"${compose[@]}" logs --no-color --tail=300 migrate api webhook-receiver >&2 || true
		"${compose[@]}" logs --no-color --tail=50 postgres >&2 || true
	fi
	"${compose[@]}" down -v --remove-orphans >/dev/null 2>&1 || true
	rm -rf "$tmp"
	printf 'compose smoke test took %ss\n' "$(($(date +%s) - started))"
	printf 'smoke: %s passed, %s failed\n' "$passed" "$([ "$rc" = 0 ] && echo 0 || echo 1)"
}
trap cleanup EXIT

# json KEY < doc: a top-level field of a JSON object, as text.
json() {
	if command -v jq >/dev/null; then
		jq -er --arg k "$1" '.[$k] | tostring'
	else
		python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
	fi
}

# call NAME METHOD PATH TOKEN [BODY [HEADER...]]: prints the status code; the
# body goes to $tmp/NAME.body, the headers to $tmp/NAME.headers.
call() {
	local name=$1 method=$2 path=$3 token=$4 body=${5:-}
	shift $(($# < 5 ? $# : 5))
	local args=(-sS --max-time 15 -X "$method" -o "$tmp/$name.body" -D "$tmp/$name.headers" -w '%{http_code}')
	[ -z "$token" ] || args+=(-H "Authorization: Bearer $token")
	[ -z "$body" ] || args+=(-H 'Content-Type: application/json' --data-binary "$body")
	local h
	for h in "$@"; do args+=(-H "$h"); done
	curl "${args[@]}" "$base$path"
}
expect_status() { # expect_status WANT GOT NAME
	[ "$2" = "$1" ] || fail "$3: HTTP $2, want $1; body: $(head -c 2000 "$tmp/$3.body")"
}

step "compose: ${compose[*]}, project $COMPOSE_PROJECT_NAME"
"${compose[@]}" down -v --remove-orphans >/dev/null 2>&1 || true
# One build: migrate and api share the image (`up --build` would build it twice).
"${compose[@]}" build api
built=$(date +%s)
printf 'built the api image in %ss\n' "$((built - started))"
"${compose[@]}" up -d
hostport=$("${compose[@]}" port api 8080 | tail -n 1)
[ -n "$hostport" ] || fail "api publishes no port"
base=http://127.0.0.1:${hostport##*:}

step "waiting for $base/readyz (at most ${ready_timeout}s)"
deadline=$(($(date +%s) + ready_timeout))
until curl -fsS -o /dev/null --max-time 2 "$base/readyz" 2>/dev/null; do
	[ "$(date +%s)" -lt "$deadline" ] || fail "/readyz did not answer 200 within ${ready_timeout}s"
	sleep 1
done
pass "/readyz answers 200, $(($(date +%s) - built))s after the build"

migrate_ids=$("${compose[@]}" ps -a -q migrate)
[ "$(wc -w <<<"$migrate_ids")" = 1 ] || fail "want exactly one migrate container, got: $migrate_ids"
[ "$(docker inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$migrate_ids")" = 'exited 0' ] ||
	fail "migrate did not exit 0"
pass "migrate ran once and exited 0"

step "actors"
staff_json=$("${compose[@]}" exec -T api /api actor create --name smoke-staff --role staff)
customer_json=$("${compose[@]}" exec -T api /api actor create --name smoke-customer --role customer --credit-limit-cents 100000000)
staff=$(json token <<<"$staff_json") || fail "actor create (staff) printed: $staff_json"
customer=$(json token <<<"$customer_json") || fail "actor create (customer) printed: $customer_json"
pass "created a staff member and a customer"

step "product"
sku=SMOKE-$(date +%s)-$$
code=$(call product POST /v1/products "$staff" "{\"sku\":\"$sku\",\"name\":\"Smoke test widget\",\"price_cents\":1250,\"stock\":10}")
expect_status 201 "$code" product
product_id=$(json id <"$tmp/product.body")
pass "staff created product $product_id"

step "order, then the same request again with the same Idempotency-Key"
key=smoke-order-$(date +%s)-$$
order_body="{\"lines\":[{\"product_id\":\"$product_id\",\"quantity\":2}]}"
code=$(call order POST /v1/orders "$customer" "$order_body" "Idempotency-Key: $key")
expect_status 201 "$code" order
order_id=$(json id <"$tmp/order.body")
[ "$(json total_cents <"$tmp/order.body")" = 2500 ] || fail "order total_cents: $(cat "$tmp/order.body")"
pass "customer placed order $order_id"

code=$(call replay POST /v1/orders "$customer" "$order_body" "Idempotency-Key: $key")
expect_status 201 "$code" replay
grep -qiE '^idempotent-replayed:[[:space:]]*true[[:space:]]*$' "$tmp/replay.headers" ||
	fail "replay lacks 'Idempotent-Replayed: true'; headers: $(cat "$tmp/replay.headers")"
cmp -s "$tmp/order.body" "$tmp/replay.body" ||
	fail "replayed body differs: $(cat "$tmp/order.body") vs $(cat "$tmp/replay.body")"
pass "replay answered 201 with Idempotent-Replayed: true and the same body"

code=$(call stock GET "/v1/products/$product_id/stock" "$staff")
expect_status 200 "$code" stock
[ "$(json stock <"$tmp/stock.body")" = 8 ] || fail "stock after one order of 2 from 10: $(cat "$tmp/stock.body")"
pass "stock taken once (10 -> 8)"

code=$(call edit PATCH "/v1/products/$product_id" "$staff" '{"price_cents":1300}' 'If-Match: "v1"')
expect_status 200 "$code" edit
pass "price edited with the product's first ETag after a sale"

step "the order's event at the demo webhook receiver"
deadline=$(($(date +%s) + 30))
until "${compose[@]}" logs --no-color webhook-receiver 2>/dev/null | grep -q "msg=event .*type=order.placed .*$order_id"; do
	[ "$(date +%s)" -lt "$deadline" ] ||
		fail "the receiver logged no order.placed for $order_id within 30s: $("${compose[@]}" logs --no-color --tail=20 webhook-receiver 2>&1)"
	sleep 1
done
pass "webhook-receiver verified the signed order.placed of $order_id and logged it"

step "metrics"
code=$(call metrics GET /metrics "")
expect_status 200 "$code" metrics
grep -qiE '^content-type:[[:space:]]*text/plain' "$tmp/metrics.headers" ||
	fail "/metrics content type: $(grep -i '^content-type' "$tmp/metrics.headers")"
grep -qE '^# (HELP|TYPE) ' "$tmp/metrics.body" || fail "/metrics is not Prometheus text: $(head -c 500 "$tmp/metrics.body")"
pass "/metrics answers Prometheus text ($(grep -c '^# TYPE ' "$tmp/metrics.body") metric families)"

step "api check"
check_out=$("${compose[@]}" exec -T api /api check 2>&1) ||
	fail "api check found maintained values that disagree with the orders: $check_out"
pass "api check finds every maintained balance and stock level consistent"
