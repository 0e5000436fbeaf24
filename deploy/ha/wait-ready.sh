#!/usr/bin/env bash
# Waits for the compose profile `ha` (docs/ha.md): first a Patroni leader
# with a synchronous standby, then (with --placement) an order placed
# through HAProxy on $HA_URL. Used by `make up-ha` and
# deploy/compose-ha-chaos.sh. COMPOSE names the compose command.
set -Eeuo pipefail
compose=${COMPOSE:-docker-compose}
url=${HA_URL:-http://127.0.0.1:${HA_PORT:-8089}}
what=${1:-}

# A leader, and a synchronous standby named in the cluster's state (asked of
# patroni-1's REST API from inside its container: the port is not published).
node=$($compose --profile ha ps -q patroni-1)
for i in $(seq 1 120); do
	cluster=$(docker exec "$node" curl -fsS --max-time 2 http://127.0.0.1:8008/cluster 2>/dev/null || true)
	if grep -q '"role": *"leader"' <<<"$cluster" && grep -q '"role": *"sync_standby"' <<<"$cluster"; then
		echo "ha: leader and synchronous standby up (${i}s)" >&2
		break
	fi
	[ "$i" -lt 120 ] || { echo "ha: no leader with a synchronous standby within 120s" >&2; exit 1; }
	sleep 1
done
[ "$what" = --placement ] || exit 0

for i in $(seq 1 120); do
	curl -fsS -o /dev/null --max-time 2 "$url/readyz" 2>/dev/null && break
	[ "$i" -lt 120 ] || { echo "ha: $url/readyz did not answer within 120s" >&2; exit 1; }
	sleep 1
done
seed=$(docker exec "$($compose --profile ha ps -q ha-api-1)" /api seed)
json() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }
token=$(json "[a for a in d['actors'] if a['role']=='customer'][0]['token']" <<<"$seed")
product=$(json "d['products'][0]['id']" <<<"$seed")
for i in $(seq 1 60); do
	code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -X POST "$url/v1/orders" \
		-H "Authorization: Bearer $token" -H "Idempotency-Key: up-ha-check" -H 'Content-Type: application/json' \
		-d "{\"lines\":[{\"product_id\":\"$product\",\"quantity\":1}]}" || true)
	if [ "$code" = 201 ] || [ "$code" = 200 ]; then
		echo "ready: $url (HAProxy over two replicas; writes go to the Patroni leader)" >&2
		exit 0
	fi
	sleep 1
done
echo "ha: no placement succeeded within 60s (last status $code)" >&2
exit 1
