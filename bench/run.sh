#!/usr/bin/env bash
# bench/run.sh — the recipe behind `make bench`.
#
# Starts a throwaway PostgreSQL (initdb in a temp dir, as CI does), builds and
# migrates the service, creates the customers with `api actor create`, seeds
# 10,000 products, then runs cmd/benchrun: every scenario at every
# concurrency for a fixed time, pgbench's ceiling scripts alternating with
# the service runs, the invariants after every run. Writes
# docs/bench/REPORT.md (generated section), docs/bench/throughput.png,
# docs/bench/history/$BENCH_LABEL.json, and raw outputs in docs/bench/raw/.
# Exits non-zero when a run broke an invariant (FAILED).
#
# Knobs (environment): BENCH_DURATION [10s] BENCH_WARMUP [2s]
#   BENCH_CONCURRENCY [1,8,32]
#   BENCH_SCENARIOS [spread,hot,replay,storm,mixed,nokeys,dispatch,steady]: the
#   throughput scenarios, then "steady" = drain,lag,soak,history (each may be
#   named alone). "work" alone runs only the counting phase and the
#   pg_stat_statements phase (each request kind's statements, executor and
#   planner time, CPU and latency at c=1; BENCH_WORK_COUNT [1000] requests of
#   each) and writes raw/results-<label>.json, leaving REPORT.md as it is
#   (every throughput run does the phase too). Steady-state knobs:
#   BENCH_SOAK [10m] soak length, BENCH_SOAK_TTL [2m] the service's
#   IDEMPOTENCY_TTL and OUTBOX_RETENTION during the soak, BENCH_SOAK_RATE [0.7 × the lag scenario's peak],
#   BENCH_DRAIN_EVENTS [50000], BENCH_HISTORY_ORDERS [100000]. A run of
#   steady scenarios only leaves the throughput section of REPORT.md alone.
#   BENCH_LABEL [current] BENCH_CUSTOMERS [64] BENCH_API_ENV ["KEY=VAL ..."]
#   BENCH_PPROF [dir: CPU profiles of the service per run] PGBIN [/usr/lib/postgresql/15/bin]
#   BENCH_QUIET_WAIT [10s]: before each run, wait up to this long for other
#   processes on the machine to go quiet (a shared box's noise).
#   BENCH_APIS="label=/path/to/api,label=/path/to/api,…" measures several
#   service binaries in rotation (before/after comparisons in one session).
#   BENCH_NO_PGBENCH=1 skips pgbench and the half-peak runs (quick experiments).
#   BENCH_KEEP=1 keeps the temp dir (server stopped) for inspection.
#   BENCH_API_SRC [repo root] builds the service from another checkout (e.g. a
#   worktree at an earlier commit) while the harness stays this one, so that
#   optimisation steps are measured by the same benchmark.
#   BENCH_COMPARE=tracing runs, instead of the scenarios, the spread placement
#   load at c=32 (the last of BENCH_CONCURRENCY) against the service with
#   tracing off and on (exporting to an OTLP receiver inside the harness),
#   alternating for BENCH_COMPARE_ROUNDS [2] rounds of BENCH_DURATION per
#   side, and writes its own section of REPORT.md and compare/tracing.json.
#   BENCH_COMPARE=pgbouncer does the same with one replica straight to
#   PostgreSQL against two replicas through Debian's PgBouncer in transaction
#   mode (the harness starts it); compare/pgbouncer.json.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DURATION=${BENCH_DURATION:-10s}
WARMUP=${BENCH_WARMUP:-2s}
CONCURRENCY=${BENCH_CONCURRENCY:-1,8,32}
[ -z "${BENCH_COMPARE:-}" ] || CONCURRENCY=${BENCH_CONCURRENCY:-32}
SCENARIOS=${BENCH_SCENARIOS:-spread,hot,replay,storm,mixed,nokeys,dispatch,steady}
LABEL=${BENCH_LABEL:-current}
CUSTOMERS=${BENCH_CUSTOMERS:-64}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
PGBENCH=${PGBENCH:-$(command -v pgbench || echo "$PGBIN/pgbench")}
OUT=$ROOT/docs/bench
RAW=$OUT/raw
START=$(date +%s)

mkdir -p "$RAW"
WORK=$(mktemp -d /tmp/ordersvc-bench.XXXXXX)
chmod 755 "$WORK"
asdb() { "$@"; }
if [ "$(id -u)" = 0 ]; then
  # PostgreSQL refuses to run as root: run the server as postgres.
  chown postgres "$WORK"
  asdb() { runuser -u postgres -- "$@"; }
fi

cleanup() {
  asdb "$PGBIN/pg_ctl" -D "$WORK/data" -m fast stop >/dev/null 2>&1 || true
  cp "$WORK/pg.log" "$RAW/postgres-$LABEL.log" 2>/dev/null || true
  if [ "${BENCH_KEEP:-0}" != 1 ]; then rm -rf "$WORK"; else echo "kept $WORK"; fi
}
trap cleanup EXIT

# A free port for the server, below the ephemeral range so that no client
# socket of another process holds it.
PORT=${BENCH_PG_PORT:-25450}
while ss -Htan "( sport = :$PORT )" 2>/dev/null | grep -q . || (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; do
  PORT=$((PORT + 1))
done

echo "== PostgreSQL in $WORK on 127.0.0.1:$PORT"
asdb "$PGBIN/initdb" -D "$WORK/data" -U postgres --auth=trust -E UTF8 --locale=C >/dev/null
# In the configuration file, not on the command line, so that ALTER SYSTEM
# can turn the statistics on for the work phase.
printf '%s\n' "shared_preload_libraries = 'pg_stat_statements'" "pg_stat_statements.track = none" >>"$WORK/data/postgresql.conf"
# Durability off, as in CI: the benchmark measures CPU and round trips, not
# the disk; commits cost the same for the service and for pgbench.
# pg_stat_statements is loaded but tracks nothing, except during benchrun's
# work phase (pgss.go), which turns it on (track = all, track_planning).
asdb "$PGBIN/pg_ctl" -D "$WORK/data" -l "$WORK/pg.log" -w -o "-p $PORT -k $WORK \
  -c listen_addresses=127.0.0.1 -c max_connections=300 -c shared_buffers=256MB \
  -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
  -c log_line_prefix='%m [%p] %a %c:%l '" start >/dev/null
DB=postgres://postgres@127.0.0.1:$PORT/ordersvc?sslmode=disable
psql -q -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -c 'CREATE DATABASE ordersvc'

echo "== build"
API_SRC=${BENCH_API_SRC:-$ROOT}
(cd "$API_SRC" && go build -o "$WORK/api" ./cmd/api)
(cd "$ROOT/bench" && go build -o "$WORK/benchrun" ./cmd/benchrun)

echo "== migrate, create $CUSTOMERS customers"
DATABASE_URL=$DB "$WORK/api" migrate up >/dev/null
: >"$RAW/customers.jsonl"
for i in $(seq 1 "$CUSTOMERS"); do
  DATABASE_URL=$DB "$WORK/api" actor create --name "bench customer $i" --role customer \
    --credit-limit-cents 100000000000 >>"$RAW/customers.jsonl"
done
DATABASE_URL=$DB "$WORK/api" actor create --name "bench staff" --role staff >"$RAW/staff.json"
# Two customers that only the history scenario uses: one gets a long
# history, the other none.
: >"$RAW/history-customers.jsonl"
for who in heavy fresh; do
  DATABASE_URL=$DB "$WORK/api" actor create --name "bench history $who" --role customer \
    --credit-limit-cents 100000000000 >>"$RAW/history-customers.jsonl"
done

if [ -n "${BENCH_COMPARE:-}" ]; then echo "== comparison $BENCH_COMPARE (spread at c=${CONCURRENCY##*,}, $DURATION per side and round)"; else echo "== benchmark ($SCENARIOS at $CONCURRENCY, $DURATION each)"; fi
read -r -a API_ENV <<<"${BENCH_API_ENV:-}"
ENV_FLAGS=()
for kv in "${API_ENV[@]}"; do ENV_FLAGS+=(-api-env "$kv"); done
PPROF_FLAGS=()
if [ "${BENCH_NO_PGBENCH:-0}" = 1 ]; then PPROF_FLAGS+=(-no-pgbench); fi
if [ -n "${BENCH_APIS:-}" ]; then PPROF_FLAGS+=(-apis "$BENCH_APIS"); fi
if [ -n "${BENCH_PPROF:-}" ]; then PPROF_FLAGS+=(-pprof "$BENCH_PPROF"); fi
if [ -n "${BENCH_COMPARE:-}" ]; then PPROF_FLAGS+=(-compare "$BENCH_COMPARE" -compare-rounds "${BENCH_COMPARE_ROUNDS:-2}"); fi
status=0
(cd "$ROOT" && "$WORK/benchrun" -api "$WORK/api" -db "$DB" -pgdata "$WORK/data" -pglog "$WORK/pg.log" \
  -customers "$RAW/customers.jsonl" -pgbench "$PGBENCH" -scripts bench/pgbench \
  -out "$OUT" -raw "$RAW" -label "$LABEL" -commit "$(git -C "$API_SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  -history-customers "$RAW/history-customers.jsonl" -soak "${BENCH_SOAK:-10m}" -soak-ttl "${BENCH_SOAK_TTL:-2m}" \
  -soak-rate "${BENCH_SOAK_RATE:-0}" -drain-events "${BENCH_DRAIN_EVENTS:-50000}" -history-orders "${BENCH_HISTORY_ORDERS:-100000}" \
  -work-count "${BENCH_WORK_COUNT:-1000}" -duration "$DURATION" -warmup "$WARMUP" -quiet-wait "${BENCH_QUIET_WAIT:-10s}" -concurrency "$CONCURRENCY" -scenarios "$SCENARIOS" \
  ${ENV_FLAGS[@]+"${ENV_FLAGS[@]}"} ${PPROF_FLAGS[@]+"${PPROF_FLAGS[@]}"}) || status=$?

echo "== done in $(( $(date +%s) - START ))s; report: docs/bench/REPORT.md"
exit $status
