#!/usr/bin/env bash
# Smoke test of the compose profile `scale`: three API replicas behind HAProxy
# (round robin, health check on /readyz), through PgBouncer in transaction
# mode, the migrate job direct to PostgreSQL. It proves, through the load
# balancer:
#
#   1. a storm of STORM_REQUESTS concurrent placements with one
#      Idempotency-Key, spread over the replicas, places exactly one order:
#      every answer is the same 201 and body, all but one carry
#      `Idempotent-Replayed: true` (EXT.IDEMPOTENCY.*);
#   2. while LOAD_WORKERS clients place orders (each retrying with its own
#      key on a connection failure, 502, 503 or 409 idempotency_in_progress,
#      as the contract asks of a client), one replica is stopped with
#      `docker stop` (SIGTERM: /readyz turns 503, HAProxy takes it out, the
#      replica drains and exits 0). Every acknowledged (201) order exists
#      afterwards, there is no order nobody was told of, stock adds up, and
#      `api check` finds nothing.
#
# The stack and its volumes are removed afterwards, also on failure (then its
# logs are printed).
#
#   deploy/compose-scale-smoke.sh                                             # registry access
#   eval "$(deploy/build-local-images.sh scale)" && deploy/compose-scale-smoke.sh   # no registry
#
# Environment: COMPOSE (default: `docker compose` if present, else
# `docker-compose`), COMPOSE_PROJECT_NAME [ordersvc-scale-smoke], SCALE_PORT
# [empty: a free port Docker picks], READY_TIMEOUT seconds after the build
# [180], STORM_REQUESTS [60], LOAD_WORKERS [8], LOAD_BEFORE_STOP and
# LOAD_AFTER_STOP seconds of load around the stop [3, 4], and the image
# overrides docker-compose.yml reads (POSTGRES_IMAGE, HAPROXY_IMAGE,
# PGBOUNCER_IMAGE, GO_IMAGE, ...). Give it a time budget from outside
# (`timeout -k 120 900 deploy/compose-scale-smoke.sh`, as .ci/run does): on
# SIGTERM it says so, then cleans up.
set -Eeuo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-ordersvc-scale-smoke}
export COMPOSE_PROFILES=scale
export API_BIND=127.0.0.1 SCALE_PORT=${SCALE_PORT-}
ready_timeout=${READY_TIMEOUT:-180}
storm_requests=${STORM_REQUESTS:-60}
load_workers=${LOAD_WORKERS:-8}
load_before_stop=${LOAD_BEFORE_STOP:-3}
load_after_stop=${LOAD_AFTER_STOP:-4}
replicas=(api-1 api-2 api-3)
stopped=api-2

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
# The stack by its compose labels, whatever the compose version does with
# services of a profile on `down`.
remove_leftovers() {
	local ids vols
	ids=$(docker ps -aq --filter "label=com.docker.compose.project=$COMPOSE_PROJECT_NAME" 2>/dev/null || true)
	[ -z "$ids" ] || docker rm -f $ids >/dev/null 2>&1 || true
	vols=$(docker volume ls -q --filter "label=com.docker.compose.project=$COMPOSE_PROJECT_NAME" 2>/dev/null || true)
	[ -z "$vols" ] || docker volume rm -f $vols >/dev/null 2>&1 || true
}
cleanup() {
	local rc=$?
	trap - TERM INT
	touch "$tmp/stop-load" 2>/dev/null || true
	wait 2>/dev/null || true
	if [ "$rc" != 0 ]; then
		printf '\n== scale smoke test failed (exit %s); stack state and logs:\n' "$rc" >&2
		"${compose[@]}" ps -a >&2 || true
		"${compose[@]}" logs --no-color --tail=100 migrate "${replicas[@]}" >&2 || true
		"${compose[@]}" logs --no-color --tail=50 haproxy pgbouncer postgres >&2 || true
	fi
	"${compose[@]}" down -v --remove-orphans >/dev/null 2>&1 || true
	remove_leftovers
	rm -rf "$tmp"
	printf 'compose scale smoke test took %ss\n' "$(($(date +%s) - started))"
	printf 'scale smoke: %s passed, %s failed\n' "$passed" "$([ "$rc" = 0 ] && echo 0 || echo 1)"
}
trap cleanup EXIT
trap 'fail "stopped by a signal (the time budget ran out?) after $(($(date +%s) - started))s"' TERM INT

# json KEY < doc: a top-level field of a JSON object, as text.
json() { jq -er --arg k "$1" '.[$k] | tostring'; }
command -v jq >/dev/null || fail "needs jq"

# call NAME METHOD PATH TOKEN [BODY [HEADER...]]: prints the status code; the
# body goes to $tmp/NAME.body, the headers to $tmp/NAME.headers.
call() {
	local name=$1 method=$2 path=$3 token=$4 body=${5:-}
	shift $(($# < 5 ? $# : 5))
	local args=(-sS --max-time 20 -X "$method" -o "$tmp/$name.body" -D "$tmp/$name.headers" -w '%{http_code}')
	[ -z "$token" ] || args+=(-H "Authorization: Bearer $token")
	[ -z "$body" ] || args+=(-H 'Content-Type: application/json' --data-binary "$body")
	local h
	for h in "$@"; do args+=(-H "$h"); done
	curl "${args[@]}" "$base$path" || echo 000
}
expect_status() { # expect_status WANT GOT NAME
	[ "$2" = "$1" ] || fail "$3: HTTP $2, want $1; body: $(head -c 2000 "$tmp/$3.body" 2>/dev/null)"
}

# place OUT KEY: places one order of one unit as the customer through HAProxy,
# retrying with the same key while the answer says "try again" (no
# connection, 502, 503, 409 idempotency_in_progress), at most 40 times.
# Writes "code attempts served-by replayed" to OUT.line and the body to
# OUT.body.
place() {
	local out=$1 key=$2 code attempt served replayed
	for attempt in $(seq 1 40); do
		code=$(curl -sS --max-time 20 -o "$out.body" -D "$out.headers" -w '%{http_code}' \
			-H "Authorization: Bearer $customer" -H 'Content-Type: application/json' \
			-H "Idempotency-Key: $key" --data-binary "$order_body" "$base/v1/orders" 2>>"$out.curl") || code=000
		case $code in
		000 | 502 | 503) ;;
		409) grep -q idempotency_in_progress "$out.body" || break ;;
		*) break ;;
		esac
		sleep 0.2
	done
	served=$(sed -n 's/^[Xx]-[Ss]erved-[Bb]y:[[:space:]]*\([^[:space:]]*\).*/\1/p' "$out.headers" 2>/dev/null | tail -n 1)
	replayed=$(grep -qiE '^idempotent-replayed:[[:space:]]*true' "$out.headers" 2>/dev/null && echo replayed || echo original)
	echo "$code $attempt ${served:--} $replayed" >"$out.line"
}

step "compose: ${compose[*]}, project $COMPOSE_PROJECT_NAME, profile scale"
"${compose[@]}" down -v --remove-orphans >/dev/null 2>&1 || true
remove_leftovers
# One build: the migrate job and the replicas share the image.
"${compose[@]}" build api-1
built=$(date +%s)
printf 'built the api image in %ss\n' "$((built - started))"
"${compose[@]}" up -d haproxy
hostport=$("${compose[@]}" port haproxy 8088 | tail -n 1)
[ -n "$hostport" ] || fail "haproxy publishes no port"
base=http://127.0.0.1:${hostport##*:}

step "waiting until HAProxy at $base routes to all ${#replicas[@]} replicas (at most ${ready_timeout}s)"
deadline=$(($(date +%s) + ready_timeout))
declare -A seen=()
while [ "${#seen[@]}" -lt "${#replicas[@]}" ]; do
	[ "$(date +%s)" -lt "$deadline" ] ||
		fail "within ${ready_timeout}s HAProxy routed /readyz to ${!seen[*]:-no replica} only, want ${replicas[*]}"
	served=$(curl -fsS -o /dev/null -D - --max-time 2 "$base/readyz" 2>/dev/null |
		sed -n 's/^[Xx]-[Ss]erved-[Bb]y:[[:space:]]*\([^[:space:]]*\).*/\1/p') || served=""
	if [ -n "$served" ]; then seen[$served]=1; else sleep 1; fi
done
pass "HAProxy answers /readyz 200 from ${!seen[*]}, $(($(date +%s) - built))s after the build"

migrate_ids=$("${compose[@]}" ps -a -q migrate)
[ "$(wc -w <<<"$migrate_ids")" = 1 ] || fail "want exactly one migrate container, got: $migrate_ids"
[ "$(docker inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$migrate_ids")" = 'exited 0' ] ||
	fail "migrate did not exit 0"
pass "migrate ran once, direct to PostgreSQL, and exited 0"

step "actors and a product (the CLI through PgBouncer)"
staff_json=$("${compose[@]}" exec -T api-1 /api actor create --name scale-staff --role staff)
customer_json=$("${compose[@]}" exec -T api-1 /api actor create --name scale-customer --role customer --credit-limit-cents 100000000000)
staff=$(json token <<<"$staff_json") || fail "actor create (staff) printed: $staff_json"
customer=$(json token <<<"$customer_json") || fail "actor create (customer) printed: $customer_json"
initial_stock=100000
sku=SCALE-$(date +%s)-$$
code=$(call product POST /v1/products "$staff" "{\"sku\":\"$sku\",\"name\":\"Scale test widget\",\"price_cents\":100,\"stock\":$initial_stock}")
expect_status 201 "$code" product
product_id=$(json id <"$tmp/product.body")
order_body="{\"lines\":[{\"product_id\":\"$product_id\",\"quantity\":1}]}"
pass "created a staff member, a customer and product $product_id (stock $initial_stock)"

step "same-key storm: $storm_requests concurrent placements with one Idempotency-Key"
mkdir "$tmp/storm"
storm_key=scale-storm-$(date +%s)-$$
# Start gun: every request waits on a shared lock that is released at once.
exec 9>"$tmp/gun"
flock 9
for i in $(seq 1 "$storm_requests"); do
	(
		exec 9>&-
		flock -s "$tmp/gun" true
		place "$tmp/storm/$i" "$storm_key"
	) &
done
sleep 1
flock -u 9
exec 9>&-
wait
cat "$tmp"/storm/*.line >"$tmp/storm.lines"
[ "$(wc -l <"$tmp/storm.lines")" = "$storm_requests" ] || fail "storm: $(wc -l <"$tmp/storm.lines") of $storm_requests requests reported"
bad=$(awk '$1 != 201' "$tmp/storm.lines" | head -n 3)
[ -z "$bad" ] || fail "storm: answers other than 201 (code attempts replica replayed): $bad"
bodies=$(for f in "$tmp"/storm/*.body; do sha256sum <"$f"; done | sort -u | wc -l)
[ "$bodies" = 1 ] || fail "storm: $bodies different bodies among the answers, want 1"
originals=$(awk '$4 == "original"' "$tmp/storm.lines" | wc -l)
[ "$originals" = 1 ] || fail "storm: $originals answers without Idempotent-Replayed: true, want exactly 1"
storm_order=$(json id <"$tmp/storm/1.body")
spread=$(awk '{ n[$3]++ } END { for (r in n) printf "%s %s=%d", (k++ ? "," : ""), r, n[r] }' "$tmp/storm.lines")
retried=$(awk '$2 > 1' "$tmp/storm.lines" | wc -l)
[ "$(awk '{ print $3 }' "$tmp/storm.lines" | sort -u | wc -l)" -ge 2 ] || fail "storm: every answer came from one replica ($spread)"
code=$(call stock1 GET "/v1/products/$product_id/stock" "$staff")
expect_status 200 "$code" stock1
[ "$(json stock <"$tmp/stock1.body")" = $((initial_stock - 1)) ] || fail "storm: stock after it: $(cat "$tmp/stock1.body"), want $((initial_stock - 1))"
pass "storm placed one order ($storm_order): $storm_requests × 201, one body, 1 original and $((storm_requests - 1)) replays; replicas:$spread; $retried retried after 409/503"

step "placements by $load_workers clients while $stopped is stopped (docker stop: SIGTERM, drain)"
mkdir "$tmp/load"
load_worker() {
	local w=$1 n=0 key
	while [ ! -e "$tmp/stop-load" ]; do
		n=$((n + 1))
		key=scale-load-$w-$n-$$
		place "$tmp/load/$w.$n" "$key"
		read -r code attempts served replayed <"$tmp/load/$w.$n.line"
		if [ "$code" = 201 ]; then
			printf '%s %s %s %s %s\n' "$EPOCHREALTIME" "$(jq -r .id <"$tmp/load/$w.$n.body")" "$attempts" "$served" "$key" >>"$tmp/load/$w.acked"
		else
			printf '%s %s %s %s\n' "$key" "$code" "$attempts" "$(head -c 300 "$tmp/load/$w.$n.body" 2>/dev/null)" >>"$tmp/load/$w.failed"
		fi
		rm -f "$tmp/load/$w.$n".*
	done
}
for w in $(seq 1 "$load_workers"); do load_worker "$w" & done
sleep "$load_before_stop"
stopped_id=$("${compose[@]}" ps -q "$stopped")
[ -n "$stopped_id" ] || fail "no container for $stopped"
stop_began=$EPOCHREALTIME
docker stop "$stopped_id" >/dev/null
stop_ended=$EPOCHREALTIME
sleep "$load_after_stop"
touch "$tmp/stop-load"
wait
cat "$tmp"/load/*.acked 2>/dev/null | sort -n >"$tmp/acked" || true
failed=$(cat "$tmp"/load/*.failed 2>/dev/null | head -n 5 || true)
[ -z "$failed" ] || fail "placements that never got a 201 (key code attempts body): $failed"
acked=$(wc -l <"$tmp/acked")
[ "$acked" -gt 0 ] || fail "no placement was acknowledged"
during=$(awk -v a="$stop_began" -v b="$stop_ended" '$1 >= a && $1 <= b' "$tmp/acked" | wc -l)
after=$(awk -v b="$stop_ended" '$1 > b' "$tmp/acked" | wc -l)
load_retried=$(awk '$3 > 1' "$tmp/acked" | wc -l)
after_by=$(awk -v b="$stop_ended" '$1 > b { n[$4]++ } END { for (r in n) printf "%s %s=%d", (k++ ? "," : ""), r, n[r] }' "$tmp/acked")
stop_secs=$(awk -v a="$stop_began" -v b="$stop_ended" 'BEGIN { printf "%.1f", b - a }')
exit_state=$(docker inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$stopped_id")
[ "$exit_state" = 'exited 0' ] || fail "$stopped after docker stop: $exit_state, want exited 0"
[ "$after" -gt 0 ] || fail "no placement was acknowledged after $stopped stopped"
pass "$acked placements acknowledged, $during of them during the ${stop_secs}s docker stop of $stopped (exit 0), $after after it (replicas:$after_by); $load_retried retried"

step "every acknowledged order exists, no other order, stock adds up"
# Every order of the customer, newest first, through the list's cursor.
: >"$tmp/listed"
cursor=""
for page in $(seq 1 1000); do
	code=$(call list GET "/v1/orders?limit=100${cursor:+&cursor=$cursor}" "$customer")
	expect_status 200 "$code" list
	jq -r '.items[].id' <"$tmp/list.body" >>"$tmp/listed"
	cursor=$(jq -r '.next_cursor // empty' <"$tmp/list.body")
	[ -n "$cursor" ] || break
done
sort -u "$tmp/listed" >"$tmp/listed.sorted"
{ awk '{ print $2 }' "$tmp/acked"; echo "$storm_order"; } | sort -u >"$tmp/acked.sorted"
lost=$(comm -23 "$tmp/acked.sorted" "$tmp/listed.sorted" | wc -l)
unacknowledged=$(comm -13 "$tmp/acked.sorted" "$tmp/listed.sorted" | wc -l)
[ "$lost" = 0 ] || fail "$lost acknowledged orders are missing, e.g. $(comm -23 "$tmp/acked.sorted" "$tmp/listed.sorted" | head -n 3 | paste -sd' ')"
[ "$unacknowledged" = 0 ] || fail "$unacknowledged orders exist that no client was acknowledged (a retry placed a duplicate?)"
[ "$(wc -l <"$tmp/listed")" = "$(wc -l <"$tmp/listed.sorted")" ] || fail "the order list repeats an order"
orders=$(wc -l <"$tmp/listed.sorted")
code=$(call stock2 GET "/v1/products/$product_id/stock" "$staff")
expect_status 200 "$code" stock2
[ "$(json stock <"$tmp/stock2.body")" = $((initial_stock - orders)) ] ||
	fail "stock $(json stock <"$tmp/stock2.body") after $orders orders of one unit from $initial_stock"
pass "$orders orders stored = $acked acknowledged + the storm's one; lost 0; stock $initial_stock -> $((initial_stock - orders))"

check_out=$("${compose[@]}" exec -T api-1 /api check 2>&1) ||
	fail "api check found maintained values that disagree with the orders: $check_out"
pass "api check finds every maintained balance and stock level consistent"
