#!/usr/bin/env bash
# Restore drill of the compose profile `backup` (docs/backup.md, ADR 0018):
# a backup is only a backup once it has been restored.
#
# Starts the stack with WAL archiving and the backup scheduler in a compose
# project of its own, waits for the scheduler's first full backup, then:
#   A  places orders through the API, then takes a differential backup
#      (what `make backup BACKUP_TYPE=diff` runs);
#   B  places orders, then notes the target time T on the database's clock;
#   C  places orders after T, and measures how long their WAL takes to reach
#      the repository (the RPO, set by archive_timeout);
# restores to T into a fresh cluster (postgres-pitr, its own empty volume),
# migrates nothing, runs `api check` against it, and checks that every order
# acknowledged before T is there and none placed after it. Prints the backup
# sizes, the restore time and the orders found before and after T. The stack
# and its volumes are removed afterwards, also on failure (then its logs are
# printed).
#
#   deploy/restore-drill.sh                                             # registry access
#   eval "$(deploy/build-local-images.sh)" && deploy/restore-drill.sh   # no registry
#
# Environment: COMPOSE (default: `docker compose` if present, else
# `docker-compose`), COMPOSE_PROJECT_NAME [ordersvc-restore-drill], API_PORT
# [empty: a free port Docker picks], ORDERS_PER_PHASE [30], CLIENTS [4],
# PG_ARCHIVE_TIMEOUT [60s], and the image overrides the compose files read
# (POSTGRES_IMAGE, PGBACKREST_IMAGE, GO_IMAGE, ...).
#
# DRILL_RESTORE=end or =backup runs a naive restore instead, to show that the
# drill catches it: `end` restores without a target (all archived WAL: the
# orders of C come back), `backup` only to the end of the newest backup
# (--type=immediate: the orders of B are missing). Both must fail.
set -Eeuo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-ordersvc-restore-drill}
export API_BIND=127.0.0.1 API_PORT=${API_PORT-}
orders_per_phase=${ORDERS_PER_PHASE:-30}
case ${DRILL_RESTORE:=time} in
time) restore_target=() ;; # set once the target time is known
end) restore_target=() ;;
backup) restore_target=(--type=immediate --target-action=promote) ;;
*) echo "DRILL_RESTORE=$DRILL_RESTORE: want time, end or backup" >&2; exit 2 ;;
esac
clients=${CLIENTS:-4}

if [ -n "${COMPOSE:-}" ]; then
	read -ra compose <<<"$COMPOSE"
elif docker compose version >/dev/null 2>&1; then
	compose=(docker compose)
else
	compose=(docker-compose)
fi
compose+=(-f docker-compose.yml -f deploy/backup/docker-compose.backup.yml)

started=$(date +%s)
tmp=$(mktemp -d)
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
step() { printf '\n== %s (at %ss)\n' "$*" "$(($(date +%s) - started))"; }
say() { printf 'drill: %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
cleanup() {
	local rc=$?
	if [ "$rc" != 0 ]; then
		printf '\n== restore drill failed (exit %s); stack state and logs:\n' "$rc" >&2
		"${compose[@]}" --profile backup --profile restore ps -a >&2 || true
		"${compose[@]}" --profile backup --profile restore logs --no-color --tail=60 \
			postgres backup postgres-pitr migrate api >&2 || true
	fi
	"${compose[@]}" --profile backup --profile restore down -v --remove-orphans >/dev/null 2>&1 || true
	rm -rf "$tmp"
	printf 'restore drill took %ss\n' "$(($(date +%s) - started))"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

# json KEY < doc: a top-level field of a JSON object, as text.
json() {
	if command -v jq >/dev/null; then
		jq -er --arg k "$1" '.[$k] | tostring'
	else
		python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
	fi
}

# sql SERVICE QUERY: one query on the service's cluster, unaligned output.
sql() {
	docker exec "$(container "$1")" psql -XAtq -v ON_ERROR_STOP=1 -U ordersvc -d ordersvc -c "$2"
}
# container SERVICE: the service's container id, as `remember` noted it.
declare -A containers=()
remember() {
	local service
	for service in "$@"; do
		containers[$service]=$("${compose[@]}" --profile backup --profile restore ps -q "$service" | tail -n 1)
		[ -n "${containers[$service]}" ] || fail "no container for $service"
	done
}
container() { echo "${containers[$1]}"; }
# pgbackrest_info JQ: the repository's `pgbackrest info` as JSON, through a jq filter.
pgbackrest_info() {
	docker exec "$(container backup)" sh -c 'pgbackrest --output=json info | jq -r "$1"' jq "$1"
}
# wait_for SECONDS WHAT COMMAND...: runs COMMAND every second until it succeeds.
wait_for() {
	local limit=$1 what=$2
	local deadline=$(($(date +%s) + limit))
	shift 2
	until "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -lt "$deadline" ] || fail "$what: not within ${limit}s"
		sleep 1
	done
}

# place PHASE: ORDERS_PER_PHASE orders from CLIENTS concurrent customers'
# requests; the ids of the acknowledged (201) ones go to $tmp/PHASE.ids. Any
# other answer fails the drill: nothing here is meant to fail.
place() {
	local phase=$1 c
	for c in $(seq 1 "$clients"); do
		(
			for i in $(seq "$c" "$clients" "$orders_per_phase"); do
				code=$(curl -sS --max-time 15 -o "$tmp/$phase.$c.body" -w '%{http_code}' \
					-H "Authorization: Bearer $customer" -H "Idempotency-Key: drill-$phase-$i-$$" \
					-H 'Content-Type: application/json' --data-binary "$order_body" "$base/v1/orders") || code=000
				if [ "$code" = 201 ]; then
					json id <"$tmp/$phase.$c.body" >>"$tmp/$phase.$c.ids"
				else
					echo "order $phase-$i: HTTP $code $(head -c 300 "$tmp/$phase.$c.body" 2>/dev/null)" >>"$tmp/$phase.failed"
				fi
			done
		) &
	done
	wait
	[ ! -s "$tmp/$phase.failed" ] || fail "placements not acknowledged: $(cat "$tmp/$phase.failed")"
	cat "$tmp/$phase".*.ids | sort >"$tmp/$phase.ids"
	[ "$(wc -l <"$tmp/$phase.ids")" = "$orders_per_phase" ] || fail "phase $phase: $(wc -l <"$tmp/$phase.ids") ids for $orders_per_phase orders"
}

step "compose: ${compose[*]}, project $COMPOSE_PROJECT_NAME"
"${compose[@]}" --profile backup --profile restore down -v --remove-orphans >/dev/null 2>&1 || true
"${compose[@]}" build api
"${compose[@]}" --profile backup up -d
remember postgres backup
hostport=$("${compose[@]}" port api 8080 | tail -n 1)
[ -n "$hostport" ] || fail "api publishes no port"
base=http://127.0.0.1:${hostport##*:}
wait_for 120 "$base/readyz" curl -fsS --max-time 2 "$base/readyz"
say "stack ready at $base, PostgreSQL archiving to pgBackRest ($(sql postgres 'SHOW archive_command'))"

step "the scheduler's first full backup"
t=$(now)
has_full() { [ "$(pgbackrest_info '[.[0].backup[]? | select(.type == "full")] | length')" -ge 1 ]; }
wait_for 120 "a full backup by the backup service" has_full
say "full backup in the repository $(since "$t")s after the stack was ready"

step "actors and a product"
staff=$("${compose[@]}" exec -T api /api actor create --name drill-staff --role staff | json token)
customer=$("${compose[@]}" exec -T api /api actor create --name drill-customer --role customer \
	--credit-limit-cents 100000000000 | json token)
code=$(curl -sS --max-time 15 -o "$tmp/product.body" -w '%{http_code}' -H "Authorization: Bearer $staff" \
	-H 'Content-Type: application/json' \
	--data-binary "{\"sku\":\"DRILL-$$\",\"name\":\"Restore drill widget\",\"price_cents\":100,\"stock\":100000}" \
	"$base/v1/products")
[ "$code" = 201 ] || fail "product: HTTP $code $(cat "$tmp/product.body")"
order_body="{\"lines\":[{\"product_id\":\"$(json id <"$tmp/product.body")\",\"quantity\":1}]}"

step "A: $orders_per_phase orders, then a differential backup (make backup BACKUP_TYPE=diff)"
place A
t=$(now)
"${compose[@]}" exec -T backup ordersvc-backup now diff >"$tmp/diff.log" 2>&1 || { cat "$tmp/diff.log"; fail "diff backup"; }
say "$orders_per_phase orders acknowledged; differential backup took $(since "$t")s"

step "B: $orders_per_phase orders, then the target time"
place B
target=$(sql postgres "SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') || '+00'")
[ "$DRILL_RESTORE" != time ] || restore_target=(--type=time "--target=$target" --target-action=promote)
say "$orders_per_phase orders acknowledged; target time $target"

step "C: $orders_per_phase orders after the target, and their WAL into the repository"
place C
acked=$(now)
wal=$(sql postgres 'SELECT pg_walfile_name(pg_current_wal_flush_lsn())')
archive_timeout=$(sql postgres 'SHOW archive_timeout')
archived() { [[ "$(sql postgres 'SELECT last_archived_wal FROM pg_stat_archiver')" > "$wal" || "$(sql postgres 'SELECT last_archived_wal FROM pg_stat_archiver')" == "$wal" ]]; }
wait_for 150 "WAL $wal in the repository" archived
rpo=$(since "$acked")
say "$orders_per_phase orders acknowledged; WAL $wal reached the repository ${rpo}s after the last acknowledgement (archive_timeout $archive_timeout)"
schema=$(sql postgres 'SELECT max(version_id) FROM goose_db_version')

step "backup sizes"
pgbackrest_info '.[0].backup[] | "\(.type) \(.label): database \(.info.size / 1024 | floor) KiB, in the repository \(.info.repository.delta / 1024 | floor) KiB"' |
	tee "$tmp/sizes"
repo_bytes=$(docker exec "$(container backup)" du -sb /var/lib/pgbackrest | cut -f1)
wal_count=$(docker exec "$(container backup)" sh -c 'find /var/lib/pgbackrest/archive -type f -name "0000*" | wc -l')
say "repository on disk: $((repo_bytes / 1024)) KiB ($wal_count WAL segments archived, compressed)"

step "restore to $target into a fresh cluster (postgres-pitr; ${restore_target[*]:-no target: naive variant $DRILL_RESTORE})"
t=$(now)
"${compose[@]}" --profile restore run --rm --no-deps --user postgres postgres-pitr \
	pgbackrest "${restore_target[@]}" --archive-mode=off restore \
	>"$tmp/restore.log" 2>&1 || { cat "$tmp/restore.log"; fail "pgbackrest restore"; }
restore_files=$(since "$t")
grep -E 'restore backup set|restore size' "$tmp/restore.log" | sed 's/^/  /' || true
"${compose[@]}" --profile restore up -d --no-deps postgres-pitr
remember postgres-pitr
promoted() { [ "$(sql postgres-pitr 'SELECT pg_is_in_recovery()')" = f ]; }
wait_for 120 "the restored cluster replaying WAL to the target and promoting" promoted
restore_total=$(since "$t")
docker logs "$(container postgres-pitr)" 2>&1 | grep -E 'recovery stopping|starting point-in-time recovery|consistent recovery state' | sed 's/^/  /' || true
say "restore time: ${restore_total}s (files ${restore_files}s, then WAL replay to the target and promotion)"

step "the restored cluster: api check, schema, orders"
restored_schema=$(sql postgres-pitr 'SELECT max(version_id) FROM goose_db_version')
[ "$restored_schema" = "$schema" ] || fail "schema version $restored_schema restored, $schema in the source"
check_out=$("${compose[@]}" run --rm --no-deps \
	-e 'DATABASE_URL=postgres://ordersvc:ordersvc@postgres-pitr:5432/ordersvc?sslmode=disable' api check 2>&1) ||
	fail "api check on the restored cluster: $check_out"
say "api check exits 0 on the restored cluster (schema version $restored_schema, nothing migrated)"
sql postgres-pitr 'SELECT id FROM orders' | sort >"$tmp/restored.ids"
sort -m "$tmp/A.ids" "$tmp/B.ids" >"$tmp/before.ids"
before_found=$(comm -12 "$tmp/before.ids" "$tmp/restored.ids" | wc -l)
after_found=$(comm -12 "$tmp/C.ids" "$tmp/restored.ids" | wc -l)
unknown=$(sort -m "$tmp/before.ids" "$tmp/C.ids" | comm -13 - "$tmp/restored.ids" | wc -l)
before=$(wc -l <"$tmp/before.ids")
after=$(wc -l <"$tmp/C.ids")

printf '\n== restore drill\n'
say "backups: $(paste -sd';' "$tmp/sizes" | sed 's/;/; /g')"
say "repository on disk: $((repo_bytes / 1024)) KiB"
say "target time: $target"
say "orders acknowledged before the target: $before ($orders_per_phase before the differential backup, $orders_per_phase after it); after: $after"
say "orders found in the restored cluster: $before_found of $before from before the target, $after_found of $after from after it, $unknown others"
say "restore time (RTO here): ${restore_total}s; RPO here: ${rpo}s from the last acknowledgement to its WAL in the repository (archive_timeout $archive_timeout)"
[ "$before_found" = "$before" ] || fail "$((before - before_found)) orders acknowledged before the target are missing"
[ "$after_found" = 0 ] || fail "$after_found orders placed after the target were restored"
[ "$unknown" = 0 ] || fail "$unknown restored orders were never acknowledged"
say "ok: every order acknowledged before the target is there, none after it"
