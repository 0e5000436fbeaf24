#!/usr/bin/env bash
# Runs every native fuzz target for FUZZTIME (default 20s) each, one after the
# other, and prints one line per target with its executions. Exits non-zero
# on the first finding; go test writes the failing input under the
# package's testdata/fuzz/, ready to be committed as a regression seed.
#
# The targets are built with -tags fuzzing, which leaves out the test files
# that need PostgreSQL (they carry //go:build !fuzzing): the fuzzer's
# coverage map then spans the HTTP boundary and its few dependencies, not
# testcontainers and the Docker client, which made each execution hundreds
# of times slower.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-20s}
go=${GO:-go}
pkgs=(./internal/httpapi)
heavy='testcontainers|kin-openapi|jackc/pgx|internal/testkit'
for pkg in "${pkgs[@]}"; do
	if $go list -deps -test -tags fuzzing "$pkg" | grep -Eq "$heavy"; then
		echo "fuzz: a test file of $pkg without //go:build !fuzzing pulls in the database test kit:" >&2
		$go list -deps -test -tags fuzzing "$pkg" | grep -E "$heavy" >&2
		exit 1
	fi
done
n=0
for pkg in "${pkgs[@]}"; do
	for target in $($go test -tags fuzzing -list '^Fuzz' "$pkg" | grep '^Fuzz'); do
		log=$(mktemp)
		if ! $go test -tags fuzzing -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" >"$log" 2>&1; then
			cat "$log"
			rm -f "$log"
			echo "fuzz: $target found a failing input (see above)" >&2
			exit 1
		fi
		# go test -fuzz prints "fuzz: elapsed: 20s, execs: 123456 (6172/sec), …".
		last=$(grep -E 'fuzz: elapsed: .*execs: ' "$log" | tail -1 || true)
		execs=$(sed -E 's/.*execs: ([0-9]+) \(([0-9]+)\/sec\).*/\1 executions (\2\/s)/' <<<"$last")
		rm -f "$log"
		printf '%-24s %s in %s\n' "$target" "${execs:-?}" "$fuzztime"
		n=$((n + 1))
	done
done
printf '\nfuzz: %d targets, no finding\n' "$n"
