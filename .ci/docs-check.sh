#!/usr/bin/env bash
# Opens GET /docs of a running service in headless Chromium and checks that
# the page rendered every operation of internal/httpapi/openapi.yaml (Swagger
# UI gives each one an element with id "operations-<tag>-<operationId>").
# With --screenshot FILE it also saves the rendered page (docs/api-docs.png).
#
#   TEST_DATABASE_URL=postgres://… .ci/docs-check.sh [--screenshot docs/api-docs.png]
#
# Starts bin/api on a free port against a fresh database created from
# TEST_DATABASE_URL (a superuser connection) and dropped afterwards. Needs
# chromium (Debian package) and psql. Fixed time budget: DOCS_BUDGET seconds
# (default 180) from the moment the binary is built.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
budget=${DOCS_BUDGET:-180}
shot=""
[ "${1:-}" != --screenshot ] || shot=${2:?--screenshot needs a file}

: "${TEST_DATABASE_URL:?set TEST_DATABASE_URL to a PostgreSQL superuser connection string}"
command -v chromium >/dev/null || { echo "docs-check: chromium is not installed (apt-get install chromium)" >&2; exit 1; }

work=$(mktemp -d /tmp/ordersvc-docs.XXXXXX)
db=ordersvc_docs_$$
pid=""
cleanup() {
	[ -z "$pid" ] || kill "$pid" 2>/dev/null || true
	[ -z "$pid" ] || wait "$pid" 2>/dev/null || true
	psql -q "$TEST_DATABASE_URL" -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

CGO_ENABLED=0 timeout --foreground "$budget" go build -o "$work/api" ./cmd/api
# The budget counts from here: the page, not the compiler, is under test.
deadline=$(($(date +%s) + budget))
left() { local l=$((deadline - $(date +%s))); [ "$l" -gt 0 ] || { echo "docs-check: over its budget of ${budget}s" >&2; echo 1; return; }; echo "$l"; }
psql -q "$TEST_DATABASE_URL" -c "CREATE DATABASE $db" >/dev/null
# The same server and credentials, another database.
db_url=$(python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$TEST_DATABASE_URL" "$db")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export DATABASE_URL=$db_url HTTP_ADDR=127.0.0.1:$port LOG_LEVEL=warn
"$work/api" migrate up >/dev/null
"$work/api" serve >"$work/api.log" 2>&1 &
pid=$!
base=http://127.0.0.1:$port
until curl -fsS -o /dev/null --max-time 2 "$base/readyz" 2>/dev/null; do
	[ "$(date +%s)" -lt "$deadline" ] || { cat "$work/api.log" >&2; echo "docs-check: the service did not get ready" >&2; exit 1; }
	kill -0 "$pid" 2>/dev/null || { cat "$work/api.log" >&2; echo "docs-check: the service exited" >&2; exit 1; }
	sleep 0.5
done

chrome() {
	timeout --foreground "$(left)" chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
		--no-first-run --user-data-dir="$work/profile" --virtual-time-budget=15000 "$@" 2>"$work/chromium.log"
}

# The rendered DOM, once Swagger UI has fetched and drawn the document.
chrome --dump-dom "$base/docs" >"$work/dom.html" || { tail -20 "$work/chromium.log" >&2; echo "docs-check: chromium failed" >&2; exit 1; }

# operationId and first tag of every operation under paths, from the document itself.
mapfile -t ops < <(python3 - <<'PY'
import re
ops, op, section = [], None, None
for line in open("internal/httpapi/openapi.yaml"):
    m = re.match(r"([a-z]\w*):", line)
    if m:
        section = m.group(1)
    if section != "paths":  # webhooks are the receiver's operations
        continue
    m = re.match(r"\s+operationId:\s*(\S+)", line)
    if m:
        op = m.group(1)
    m = re.match(r"\s+tags:\s*\[([^\],]+)", line)
    if m and op:
        ops.append(f"{m.group(1).strip()}-{op}")
        op = None
print("\n".join(ops))
PY
)
[ "${#ops[@]}" -gt 0 ] || { echo "docs-check: found no operations in openapi.yaml" >&2; exit 1; }
missing=()
for op in "${ops[@]}"; do
	grep -q "id=\"operations-$op\"" "$work/dom.html" || missing+=("$op")
done
if [ "${#missing[@]}" -gt 0 ]; then
	echo "docs-check: /docs did not render ${#missing[@]} of ${#ops[@]} operations: ${missing[*]}" >&2
	grep -o 'class="[^"]*error[^"]*"[^<]*<[^<]*' "$work/dom.html" | head -5 >&2 || true
	exit 1
fi
grep -q 'No API definition provided\|Failed to load API definition' "$work/dom.html" &&
	{ echo "docs-check: Swagger UI reports that it could not load the document" >&2; exit 1; }
echo "docs-check: /docs rendered all ${#ops[@]} operations of openapi.yaml in $(chromium --version 2>/dev/null)"

if [ -n "$shot" ]; then
	chrome --hide-scrollbars --window-size=1280,3100 --screenshot="$work/shot.png" "$base/docs" >/dev/null
	mv "$work/shot.png" "$shot"
	echo "docs-check: screenshot in $shot"
fi
