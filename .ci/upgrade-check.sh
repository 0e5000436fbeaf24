#!/usr/bin/env bash
# The rolling-upgrade test (docs/migrations.md) under a fixed budget
# (UPGRADE_BUDGET seconds, default 360): the previous release as two
# replicas under load, the new `api migrate up`, a rolling replacement, the
# contract migration. The fixed procedure must meet every goal, from the
# release before 00005, from the round-1 release (schema 00003) and from the
# previous landed release (35cbd62, schema 00006); the naive
# variant (the unsafe 00005 of .ci/upgrade/testdata) must miss one.
# Needs TEST_DATABASE_URL (a superuser connection string) and this clone's
# history back to the previous release (UPGRADE_FROM overrides it).
set -Eeuo pipefail
cd "$(dirname "$0")/.."
budget=${UPGRADE_BUDGET:-360}
: "${TEST_DATABASE_URL:?set TEST_DATABASE_URL to a superuser connection string}"
from=()
[ -z "${UPGRADE_FROM:-}" ] || from=(-from "$UPGRADE_FROM")
bin=$(mktemp -d /tmp/ordersvc-upgrade-bin.XXXXXX)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/upgrade" ./.ci/upgrade/main.go
start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - start) )); }

echo "--- fixed procedure (must meet every goal)"
timeout -k 10 "$(left)" "$bin/upgrade" -variant fixed "${from[@]}" -phase 2s

echo "--- naive variant: the unsafe 00005 (must miss a goal)"
set +e
timeout -k 10 "$(left)" "$bin/upgrade" -variant naive "${from[@]}" -phase 2s
status=$?
set -e
if [ "$status" -eq 0 ]; then
	echo "the naive variant met every goal: the upgrade test cannot tell the unsafe 00005 from the fixed one" >&2
	exit 1
fi
if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
	echo "the naive variant ran out of the budget (${budget}s)" >&2
	exit 1
fi
echo "naive variant failed, as it must (exit $status)"

echo "--- the round-1 release (505207a, schema 00003) to this one (must meet every goal)"
git cat-file -e 505207a^{commit} 2>/dev/null || { echo "505207a is not in this clone: clone with its history" >&2; exit 1; }
timeout -k 10 "$(left)" "$bin/upgrade" -variant fixed -from 505207a -phase 2s
echo "--- the previous landed release (35cbd62, schema 00006) to this one (must meet every goal)"
git cat-file -e 35cbd62^{commit} 2>/dev/null || { echo "35cbd62 is not in this clone: clone with its history" >&2; exit 1; }
timeout -k 10 "$(left)" "$bin/upgrade" -variant fixed -from 35cbd62 -phase 2s

echo "upgrade check done in $(( $(date +%s) - start ))s"
