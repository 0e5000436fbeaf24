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
#
# An upgrade stop (docs/migrations.md) is upgraded through, as an operator
# would: when this tree has an expand migration after a contract migration
# that a starting release lacks, the test runs one hop per stop (upgrade
# -stops finds them: the commit before that expand migration was added),
# then the last hop to this tree. Each hop is a full upgrade test; the naive variant's unsafe 00005
# applies in the first hop, so it runs only that one.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
budget=${UPGRADE_BUDGET:-360}
: "${TEST_DATABASE_URL:?set TEST_DATABASE_URL to a superuser connection string}"
bin=$(mktemp -d /tmp/ordersvc-upgrade-bin.XXXXXX)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/upgrade" ./.ci/upgrade/main.go
start=$(date +%s)
# left prints the seconds left of the budget, and fails once none are.
left() {
	local n=$(( budget - ($(date +%s) - start) ))
	if [ "$n" -le 0 ]; then
		echo "the upgrade check ran out of its budget (${budget}s)" >&2
		return 1
	fi
	echo "$n"
}

# upgrade VARIANT FROM: the upgrade test from FROM ("" for its default
# release) to this tree, through each upgrade stop; the naive variant runs
# the first hop only. It returns the upgrade binary's status (1: a goal
# missed), or 3 when the check itself cannot go on (no history, no budget).
upgrade() {
	local variant=$1 prev=$2 list stop budget_left
	list=$("$bin/upgrade" -stops ${prev:+-from "$prev"}) || return 3
	for stop in $list; do
		echo "--- upgrade stop: ${prev:-the release before 00005} to $stop"
		budget_left=$(left) || return 3
		timeout -k 10 "$budget_left" "$bin/upgrade" -variant "$variant" ${prev:+-from "$prev"} -to "$stop" -phase 2s || return
		[ "$variant" = fixed ] || return 0
		prev=$stop
	done
	budget_left=$(left) || return 3
	timeout -k 10 "$budget_left" "$bin/upgrade" -variant "$variant" ${prev:+-from "$prev"} -phase 2s
}

echo "--- fixed procedure (must meet every goal)"
upgrade fixed "${UPGRADE_FROM:-}"

echo "--- naive variant: the unsafe 00005 (must miss a goal)"
set +e
upgrade naive "${UPGRADE_FROM:-}"
status=$?
set -e
if [ "$status" -eq 0 ]; then
	echo "the naive variant met every goal: the upgrade test cannot tell the unsafe 00005 from the fixed one" >&2
	exit 1
fi
if [ "$status" -ne 1 ]; then
	echo "the naive variant did not run to its verdict (exit $status; 124 or 137: out of the budget of ${budget}s)" >&2
	exit 1
fi
echo "naive variant failed, as it must (exit $status)"

echo "--- the round-1 release (505207a, schema 00003) to this one (must meet every goal)"
git cat-file -e 505207a^{commit} 2>/dev/null || { echo "505207a is not in this clone: clone with its history" >&2; exit 1; }
upgrade fixed 505207a
echo "--- the previous landed release (35cbd62, schema 00006) to this one (must meet every goal)"
git cat-file -e 35cbd62^{commit} 2>/dev/null || { echo "35cbd62 is not in this clone: clone with its history" >&2; exit 1; }
upgrade fixed 35cbd62

echo "upgrade check done in $(( $(date +%s) - start ))s"
