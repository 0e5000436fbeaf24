#!/usr/bin/env bash
# The template check: copies the work tree to a temporary directory, renames
# the copy (tools/rename.sh example.com/shop), and proves that the copy
# builds, passes go vet and its unit tests (the packages that need no
# database), and that no "ordersvc" is left outside the rename script and the licence notice.
# The generated sqlc code is renamed like the queries it comes from, so
# `make verify` stays green in the copy; running sqlc here would rebuild the
# whole tools module under its new path, which costs more than the check. Fixed time budget: RENAME_BUDGET
# seconds (default 600).
#
#   .ci/rename-check.sh          (run by .ci/run)
set -Eeuo pipefail
cd "$(dirname "$0")/.."
budget=${RENAME_BUDGET:-600}
export GOFLAGS=${GOFLAGS:--mod=readonly}

work=$(mktemp -d /tmp/ordersvc-rename.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The files git would commit (tracked and new), not build outputs.
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
	[ -e "$f" ] && printf '%s\0' "$f"
done | tar --null -T - -cf - | tar -C "$work" -xf -

timeout --foreground "$budget" bash -Eeuo pipefail -c '
	cd "$1"
	tools/rename.sh example.com/shop
	grep -q "^module example.com/shop\$" go.mod
	go build ./...
	go vet ./...
	# Packages whose tests need no database.
	go test -count=1 ./internal/domain/ ./internal/ ./deploy/
	left=$(grep -rIl -i ordersvc . --exclude=rename.sh --exclude=LICENSE || true)
	[ -z "$left" ] || { echo "the renamed copy still says ordersvc in: $left" >&2; exit 1; }
	echo "renamed copy example.com/shop builds, vets and passes its unit tests"
' rename-check "$work" || {
	rc=$?
	[ "$rc" != 124 ] || echo "rename check: over its budget of ${budget}s" >&2
	exit "$rc"
}
