#!/usr/bin/env bash
# Chaos test of the compose profile `ha` under load (docs/ha.md, ADR 0022).
#
#   bash deploy/compose-ha-chaos.sh            # kill, switchover, degraded
#
# Starts the profile (three Patroni nodes with synchronous replication, etcd,
# HAProxy, two API replicas), a webhook counter on the host and, per phase,
# 16 clients placing orders with fresh Idempotency-Keys through HAProxy and
# retrying the same key on 503 or a broken connection. Phases:
#   kill        docker kill (SIGKILL) the leader's container mid-load
#   switchover  patronictl switchover to the synchronous standby mid-load
#   degraded    a replica stopped, then the leader killed mid-load
# After each: every acknowledged order stored exactly once (lost 0,
# duplicates 0), one order per key, no key in progress, `api check` exits 0,
# every stored order's order.placed delivered and no event for an order that
# does not exist. Prints the figures of each phase (the write outage on the
# server's side: the longest gap between the phase's commit timestamps; and
# as the clients saw it: first failure to the next placement; the clients
# retry after 100 ms, not Retry-After, so that their pacing adds little) and
# a timeline of the fault from Patroni's, PostgreSQL's and HAProxy's logs;
# exits non-zero on any violation. Needs the local images (deploy/build-local-images.sh) or a
# registry, docker compose, python3 and Go.
#
# Environment: COMPOSE_PROJECT_NAME [ordersvc-ha-chaos], HA_PORT [18589],
# CHAOS_RECEIVER_PORT [18588], CHAOS_PHASES ["kill switchover degraded"],
# CHAOS_LOAD_SECONDS [25], CHAOS_FAULT_AFTER [6] (seconds into the load),
# CHAOS_BUILD=0 (use API_IMAGE as it is, no build), CHAOS_LOG_DIR (keep each
# phase's results and logs there).
set -Eeuo pipefail
cd "$(dirname "$0")/.."

export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-ordersvc-ha-chaos}
export HA_PORT=${HA_PORT:-18589}
receiver_port=${CHAOS_RECEIVER_PORT:-18588}
phases=${CHAOS_PHASES:-kill switchover degraded}
load_seconds=${CHAOS_LOAD_SECONDS:-25}
fault_after=${CHAOS_FAULT_AFTER:-6}
export HA_WEBHOOK_URL=http://host.docker.internal:$receiver_port/
export OUTBOX_POLL_INTERVAL=${OUTBOX_POLL_INTERVAL:-200ms}
COMPOSE=${COMPOSE:-$(docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)}
export COMPOSE
url=http://127.0.0.1:$HA_PORT
t0=$(date +%s)
say() { printf 'ha-chaos [%3ss]: %s\n' "$(( $(date +%s) - t0 ))" "$*" >&2; }
compose() { $COMPOSE --profile ha "$@"; }

work=$(mktemp -d /tmp/ha-chaos.XXXXXX)
receiver_pid=""
cleanup() {
	status=$?
	[ -z "$receiver_pid" ] || kill "$receiver_pid" 2>/dev/null || true
	if [ "$status" != 0 ]; then
		compose ps >&2 || true
		compose logs --tail=40 patroni-1 patroni-2 patroni-3 ha-api-1 >&2 2>/dev/null || true
	fi
	compose down -v --remove-orphans >/dev/null 2>&1 || true
	rm -rf "$work"
	say "finished with status $status"
	exit "$status"
}
trap cleanup EXIT

go build -o "$work/chaos" ./deploy/ha/chaos
"$work/chaos" receive -addr ":$receiver_port" 2>"$work/receiver.log" &
receiver_pid=$!

say "starting the profile ha"
[ "${CHAOS_BUILD:-1}" = 0 ] || compose build ha-api-1 >/dev/null
compose up -d etcd patroni-1 patroni-2 patroni-3 ha-proxy 2>/dev/null
bash deploy/ha/wait-ready.sh
compose up -d ha-api-1 ha-api-2 2>/dev/null
HA_URL=$url bash deploy/ha/wait-ready.sh --placement

py() { python3 -c "$1" "${@:2}"; }
# ctr SERVICE: its container (docker exec is much quicker than compose exec).
ctr() {
	docker ps -q --filter "label=com.docker.compose.project=$COMPOSE_PROJECT_NAME" \
		--filter "label=com.docker.compose.service=$1" | head -n 1
}
patronictl() { docker exec "$(ctr "$1")" patronictl -c /etc/patroni/patroni.yml "${@:2}"; }
# member ROLE: the first member with that role (Leader, Sync Standby, Replica).
member() {
	local node out
	for node in patroni-1 patroni-2 patroni-3; do
		[ -n "$(ctr "$node")" ] || continue
		out=$(patronictl "$node" list -f json 2>/dev/null) || continue
		py 'import json,sys; m=[x["Member"] for x in json.loads(sys.argv[1]) if x["Role"]==sys.argv[2] and x["State"] in ("running","streaming")]; print(m[0] if m else "")' "$out" "$1"
		return
	done
}
wait_member() { # wait_member ROLE: until the cluster has one (up to 90 s)
	local m
	for _ in $(seq 1 90); do
		m=$(member "$1")
		[ -z "$m" ] || { echo "$m"; return; }
		sleep 1
	done
	say "no $1 within 90s"; return 1
}
sql() { # sql QUERY: on the leader found by the last wait_member Leader ($leader)
	docker exec "$(ctr "$leader")" psql -U postgres -d ordersvc -Atc "$1"
}
api() { docker exec "$(ctr ha-api-1)" /api "$@"; }

seed=$(api seed)
staff=$(py 'import json,sys; print([a for a in json.loads(sys.argv[1])["actors"] if a["role"]=="staff"][0]["token"])' "$seed")
product=$(curl -fsS -X POST "$url/v1/products" -H "Authorization: Bearer $staff" -H 'Content-Type: application/json' \
	-d "{\"sku\":\"CHAOS-$(date +%s)\",\"name\":\"Chaos mug\",\"price_cents\":1,\"stock\":100000000}" |
	py 'import json,sys; print(json.load(sys.stdin)["id"])')

failed=0
for phase in $phases; do
	customer=$(api actor create --name "chaos $phase" --role customer --credit-limit-cents 100000000000)
	token=$(py 'import json,sys; print(json.loads(sys.argv[1])["token"])' "$customer")
	cid=$(py 'import json,sys; d=json.loads(sys.argv[1]); print(d.get("actor_id") or d.get("id"))' "$customer")
	leader=$(wait_member Leader)
	stopped=""
	if [ "$phase" = degraded ]; then
		# A second node down before the load: the leader's kill then leaves one.
		stopped=$(wait_member Replica)
		say "docker stop $stopped"
		compose stop "$stopped" >/dev/null 2>&1
		leader=$(wait_member Leader)
	fi
	say "phase $phase: leader $leader, load ${load_seconds}s from 16 clients"
	"$work/chaos" load -url "$url" -token "$token" -product "$product" -clients 16 -for "${load_seconds}s" \
		-prefix "$phase" -out "$work/$phase.json" &
	load_pid=$!
	sleep "$fault_after"
	fault_ms=$(date +%s%3N)
	case $phase in
	kill)
		say "docker kill $leader"
		docker kill "$(ctr "$leader")" >/dev/null ;;
	switchover)
		sync=$(wait_member "Sync Standby")
		say "patronictl switchover $leader -> $sync"
		patronictl "$sync" switchover --leader "$leader" --candidate "$sync" --force >/dev/null ;;
	degraded)
		say "docker kill $leader ($stopped stopped)"
		docker kill "$(ctr "$leader")" >/dev/null ;;
	esac
	wait "$load_pid"
	[ "$phase" = switchover ] || { compose up -d "$leader" >/dev/null 2>&1; }
	[ -z "$stopped" ] || compose up -d "$stopped" >/dev/null 2>&1
	leader=$(wait_member Leader)
	# Let the dispatchers drain the outbox.
	for _ in $(seq 1 60); do
		[ "$(sql "SELECT count(*) FROM outbox_events WHERE state <> 'delivered'")" = 0 ] && break
		sleep 1
	done
	acked=$(py 'import json,sys; print(" ".join(json.load(open(sys.argv[1]))["acknowledged"].values()))' "$work/$phase.json")
	sql "SELECT id FROM orders WHERE customer_id = '$cid'" >"$work/$phase.stored"
	sql "SELECT count(*) FROM idempotency_keys WHERE state = 'in_progress'" >"$work/$phase.inprogress"
	sql "SELECT count(*) FROM idempotency_keys WHERE actor_id = '$cid'" >"$work/$phase.keys" || echo -1 >"$work/$phase.keys"
	sql "SELECT id FROM orders" >"$work/all.orders"
	# The server's side of the outage: the longest gap between two
	# consecutive commits of this phase's placements (commit timestamps,
	# track_commit_timestamp; one clock: the containers share the host's),
	# whatever the clients' pacing. Only commits up to the load's planned
	# end count: a straggler that commits after the clients stopped starting
	# placements would otherwise be measured as an outage.
	sql "SELECT extract(epoch FROM prev) * 1000, extract(epoch FROM at) * 1000
		FROM (SELECT at, lag(at) OVER (ORDER BY at) AS prev
		      FROM (SELECT pg_xact_commit_timestamp(xmin) AS at FROM orders WHERE customer_id = '$cid') c
		      WHERE at <= to_timestamp(($fault_ms + ($load_seconds - $fault_after) * 1000) / 1000.0)) g
		WHERE prev IS NOT NULL ORDER BY at - prev DESC LIMIT 1" >"$work/$phase.gap"
	# Where the time went: the cluster's and HAProxy's log lines since the
	# fault (docker's timestamps, the same clock).
	since=$(date -u -d "@$(( fault_ms / 1000 - 2 ))" +%Y-%m-%dT%H:%M:%SZ)
	for node in patroni-1 patroni-2 patroni-3 ha-proxy ha-api-1 ha-api-2; do
		c=$(docker ps -aq --filter "label=com.docker.compose.project=$COMPOSE_PROJECT_NAME" \
			--filter "label=com.docker.compose.service=$node" | head -n 1)
		[ -z "$c" ] || docker logs --timestamps --since "$since" "$c" 2>&1 | sed "s/^/$node /"
	done >"$work/$phase.logs"
	echo "$fault_ms" >"$work/$phase.fault"
	[ -z "${CHAOS_LOG_DIR:-}" ] || { mkdir -p "$CHAOS_LOG_DIR"; cp "$work/$phase".* "$CHAOS_LOG_DIR"/; }
	curl -fsS "http://127.0.0.1:$receiver_port/counts" >"$work/counts.json"
	check=ok
	api check >"$work/$phase.check" 2>&1 || check=FAILED
	py '
import json, sys
phase, work, check = sys.argv[1], sys.argv[2], sys.argv[3]
res = json.load(open(f"{work}/{phase}.json"))
acked = set(res["acknowledged"].values())
stored = [l for l in open(f"{work}/{phase}.stored").read().split() if l]
keys = int(open(f"{work}/{phase}.keys").read().strip() or -1)
inprog = int(open(f"{work}/{phase}.inprogress").read().strip())
all_orders = set(l for l in open(f"{work}/all.orders").read().split() if l)
counts = json.load(open(f"{work}/counts.json"))["placed_by_order"]
lost = len(acked - set(stored))
dups = len(stored) - len(set(stored)) + max(0, len(stored) - len(res["acknowledged"]))
events_lost = sum(1 for o in stored if not counts.get(o))
ghosts = sum(1 for o in counts if o not in all_orders)
per = [len(counts.get(o, [])) for o in stored]
# Timeline, in seconds after the fault (docker kill or patronictl).
fault = int(open(f"{work}/{phase}.fault").read()) / 1000
def ts(stamp):
    import datetime
    d, frac = stamp.rstrip("Z").split(".") if "." in stamp else (stamp.rstrip("Z"), "0")
    t = datetime.datetime.strptime(d, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc).timestamp()
    return t + float("0." + frac)
first = {}
marks = (("leader key released", "Leader key released", ""),
         ("leader key taken", "session lock as a leader", ""),
         ("leader key taken", "promoted self to leader", ""),
         ("PostgreSQL promoted", "selected new timeline ID", ""),
         ("API: database not ready", "not ready", ""),
         ("HAProxy: old leader out", "postgres-primary/", " is DOWN"),
         ("HAProxy: writes to the new leader", "postgres-primary/", " is UP"),
         ("HAProxy: an API replica out", "api/ha-api-", " is DOWN"),
         ("HAProxy: API replicas back", "api/ha-api-", " is UP"))
for line in open(f"{work}/{phase}.logs", errors="replace"):
    parts = line.split(" ", 2)
    if len(parts) < 3:
        continue
    node, stamp, text = parts
    try:
        t = ts(stamp) - fault
    except ValueError:
        continue
    if t < -1:
        continue
    for label, needle, also in marks:
        if needle in text and also in text and (label not in first or label.endswith("back")):
            first[label] = (t, node)
gap = open(f"{work}/{phase}.gap").read().split("|")
steps = []
if len(gap) == 2:
    g0, g1 = float(gap[0]) / 1000 - fault, float(gap[1]) / 1000 - fault
    steps.append(("last commit before the gap", g0))
for label in dict.fromkeys(m[0] for m in marks):
    if label in first:
        steps.append((label, first[label][0]))
if len(gap) == 2:
    steps.append(("first commit after it", g1))
if res["write_outage_from_unix_ms"]:
    steps.append(("clients: first failure", res["write_outage_from_unix_ms"] / 1000 - fault))
    steps.append(("clients: first placement after it", res["write_outage_to_unix_ms"] / 1000 - fault))
steps.sort(key=lambda x: x[1])
print("%s: acknowledged %d, stored %d, lost %d, duplicates %d, keys %d, keys in progress %d, "
      "write outage %.1f s (server: longest gap between commits; clients: %.1f s from the first failure to the next placement), "
      "503s %d, broken connections %d, other %s, p50 %.0f ms, p99 %.0f ms (in flight during the outage %.0f ms, "
      "begun after it %.0f ms), %.1f placements/s, events per order %d..%d, events lost %d, "
      "events for missing orders %d, api check %s" % (
      phase, len(res["acknowledged"]), len(stored), lost, dups, keys, inprog,
      (g1 - g0) if len(gap) == 2 else -1, res["write_outage_seconds"],
      res["answers_503"], res["broken_connections"], res["other_statuses"],
      res["p50_ms"], res["p99_ms"], res["p99_during_outage_ms"], res["p99_after_outage_ms"], res["placements_per_second"],
      min(per, default=0), max(per, default=0), events_lost, ghosts, check))
print("%s: timeline after the fault: %s" % (phase, ", ".join("%s %+.1f s" % (l, t) for l, t in steps)))
bad = lost or dups or inprog or events_lost or ghosts or check != "ok" or (keys >= 0 and keys != len(stored))
sys.exit(1 if bad else 0)
' "$phase" "$work" "$check" || failed=1
	wait_member "Sync Standby" >/dev/null || failed=1
done
exit "$failed"
