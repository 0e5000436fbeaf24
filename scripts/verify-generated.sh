#!/usr/bin/env bash
# make verify's check of the sqlc code: regenerates it and tells apart
#   - stale: what is in the working tree is not what db/queries and
#     db/migrations generate (fails: run make generate, then commit);
#   - current but not committed: the working tree is what they generate,
#     git does not have it yet (passes, and says so: commit it);
#   - current and committed.
# The working tree is left as it was.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
dir=internal/infra/dbsqlc
tool=${TOOL:-go tool -modfile=tools/go.mod}

before=$(mktemp -d)
trap 'rm -rf "$before"' EXIT
cp -a "$dir/." "$before/"
$tool sqlc generate
if ! diff -r -q "$before" "$dir" >/dev/null; then
	changed=$(diff -r -q "$before" "$dir" | sed -e "s|^Files $before/\([^ ]*\) and .*|  $dir/\1 differs|" \
		-e "s|^Only in $before.*: |  gone: $dir/|" -e "s|^Only in $dir.*: |  new: $dir/|" || true)
	rm -rf "${dir:?}"/* && cp -a "$before/." "$dir/"
	printf 'generated code is stale: db/queries or db/migrations changed since the last make generate:\n%s\nrun make generate and commit\n' "$changed" >&2
	exit 1
fi
if [ -n "$(git status --porcelain -- "$dir")" ]; then
	printf 'generated code is current but not committed (git status %s): commit it with the queries it comes from\n' "$dir" >&2
fi
