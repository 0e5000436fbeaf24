#!/usr/bin/env bash
# The optional-modules check: a copier can delete bench/ (the benchmark, with
# its output docs/bench/) and deploy/ (container builds and smoke tests)
# without touching Go code elsewhere. Copies the files git would commit,
# without those folders, to a temporary directory and proves that the copy
# builds and passes go vet (test files included), and that no Go file left
# names a path inside them in code (comments may still mention them). Then
# builds, vets and unit-tests the bench module itself (bench/go.mod), which
# `make lint` and `make test` do not reach. Fixed time budget:
# MODULES_BUDGET seconds (default 600) for both.
#
#   .ci/optional-modules-check.sh
set -Eeuo pipefail
cd "$(dirname "$0")/.."
budget=${MODULES_BUDGET:-600}
export GOFLAGS=${GOFLAGS:--mod=readonly}

# Go files outside the modules that test a module's own files: a copier
# deletes them with the module (deploy/README.md lists them). Each new one
# must be added here on purpose; any other reference fails the check.
dependents=(
	cmd/api/alerts_test.go # checks deploy/prometheus's alerting rules against the service's metrics
)

work=$(mktemp -d /tmp/ordersvc-modules.XXXXXX)
trap 'rm -rf "$work"' EXIT

git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
	case "$f" in bench/* | deploy/* | docs/bench/*) continue ;; esac
	[ -e "$f" ] && printf '%s\0' "$f"
done | tar --null -T - -cf - | tar -C "$work" -xf -
for f in "${dependents[@]}"; do
	echo "removed with the modules: $f"
	rm -f "$work/$f"
done

timeout --foreground "$budget" bash -Eeuo pipefail -c '
	cd "$1"
	test ! -e bench && test ! -e deploy
	# A string literal naming a file in the removed folders would build and
	# vet, then fail at run time: look for one outside comments.
	if grep -rnE --include="*.go" "\"([^\"]*[./])?(bench|deploy)/[^\"]*\"" . | grep -vE "^[^:]+:[0-9]+:[[:space:]]*//"; then
		echo "Go code outside bench/ and deploy/ names a path inside them (above)" >&2
		exit 1
	fi
	go build ./...
	go vet ./...
	cd "$2/bench"
	go build ./...
	go vet ./...
	go test -count=1 ./...
' _ "$work" "$PWD"
echo "optional modules: the tree without bench/ and deploy/ builds and vets; bench/ builds, vets and passes its tests"
