#!/usr/bin/env bash
# Checks, before `make up` (or `make up-scale`), that every image compose
# would pull is on this machine or its registry answers, so that a machine
# with no registry gets one line saying what to run instead of compose's raw
# lookup error.
#
#   deploy/need-images.sh [scale|ha]
#
# Reads the image settings from the environment (make exports .env's), with
# docker-compose.yml's defaults. Exit 0: every image is here or can be
# pulled; exit 1: the message names the missing images and the command.
set -Eeuo pipefail

images=("${POSTGRES_IMAGE:-postgres:17-alpine}" "${GO_IMAGE:-golang:1.26.8-bookworm}"
	"${RUNTIME_IMAGE:-gcr.io/distroless/static-debian12:nonroot}")
profile=""
case ${1:-} in
scale)
	profile=" PROFILE=scale"
	images+=("${PGBOUNCER_IMAGE:-edoburu/pgbouncer:v1.25.1-p0}" "${HAPROXY_IMAGE:-haproxy:2.8}")
	;;
ha)
	profile=" PROFILE=ha"
	images+=("${PATRONI_IMAGE:-ordersvc-local/patroni:3.0}" "${ETCD_IMAGE:-ordersvc-local/etcd:3.4}" "${HAPROXY_IMAGE:-haproxy:2.8}")
	;;
esac

# registry IMAGE: the registry host an image name is pulled from.
registry() {
	local first=${1%%/*}
	if [[ $1 == */* && ($first == *.* || $first == *:* || $first == localhost) ]]; then
		echo "$first"
	else
		echo registry-1.docker.io
	fi
}

missing=()
for image in "${images[@]}"; do
	docker image inspect "$image" >/dev/null 2>&1 && continue
	# Any HTTP answer (401 included) means the registry is reachable.
	host=$(registry "$image")
	curl -s -o /dev/null --max-time 5 "https://$host/v2/" 2>/dev/null && continue
	missing+=("$image")
done
if [ ${#missing[@]} -gt 0 ]; then
	printf 'no registry answers and these images are not on this machine: %s\n' "${missing[*]}" >&2
	printf 'run `make images%s` first: it builds local stand-ins from Debian packages (a few minutes, once) and writes their names to .env\n' "$profile" >&2
	exit 1
fi
