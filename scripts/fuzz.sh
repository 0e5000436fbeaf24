#!/usr/bin/env bash
# Runs every native fuzz target for FUZZTIME (default 20s) each, one after the
# other, and prints one line per target with its executions. Exits non-zero
# on the first finding; go test writes the failing input under the
# package's testdata/fuzz/, ready to be committed as a regression seed.
#
# The fuzz binary is built without the package's database tests (its
# external test files, and internal ones that import the test kit or the
# OpenAPI loader), through a build overlay that leaves them out: with
# testcontainers and the Docker client in the binary, the coverage map the
# fuzzer compares on every execution is so large that a target runs a few
# executions a second. The fuzz targets themselves need no database.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-20s}
go=${GO:-go}
pkgs=(./internal/httpapi)
heavy='testcontainers|kin-openapi|jackc/pgx|internal/testkit'
overlay=$(mktemp --suffix=.json)
trap 'rm -f "$overlay"' EXIT

# engine_timeout LOG DIR COUNT: the run failed only because go test's fuzz
# engine met its own -fuzztime deadline while a worker was busy ("context
# deadline exceeded", a known quirk of the engine): no crasher was written,
# and the log names no failing input. Anything else is a finding.
engine_timeout() {
	grep -q 'context deadline exceeded' "$1" &&
		! grep -q 'Failing input written to' "$1" &&
		[ "$(ls "$2" 2>/dev/null | wc -l)" = "$3" ]
}

n=0
for pkg in "${pkgs[@]}"; do
	dir=$($go list -f '{{.Dir}}' "$pkg")
	leave=$($go list -f '{{range .XTestGoFiles}}{{$.Dir}}/{{.}}{{"\n"}}{{end}}' "$pkg")
	for f in $($go list -f '{{range .TestGoFiles}}{{$.Dir}}/{{.}}{{"\n"}}{{end}}' "$pkg"); do
		if grep -Eq "\"[^\"]*($heavy)[^\"]*\"" "$f"; then
			leave+=$'\n'"$f"
		fi
	done
	{
		printf '{"Replace":{'
		sep=""
		for f in $leave; do
			printf '%s"%s":""' "$sep" "$f"
			sep=","
		done
		printf '}}\n'
	} >"$overlay"
	if $go list -overlay "$overlay" -deps -test "$pkg" | grep -Eq "$heavy"; then
		echo "fuzz: $pkg's fuzz build still pulls in the database test kit:" >&2
		$go list -overlay "$overlay" -deps -test "$pkg" | grep -E "$heavy" >&2
		exit 1
	fi
	for target in $($go test -overlay "$overlay" -list '^Fuzz' "$pkg" | grep '^Fuzz'); do
		log=$(mktemp)
		seeds_before=$(ls "$dir/testdata/fuzz/$target" 2>/dev/null | wc -l)
		if ! $go test -overlay "$overlay" -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" >"$log" 2>&1 &&
			! engine_timeout "$log" "$dir/testdata/fuzz/$target" "$seeds_before"; then
			cat "$log"
			rm -f "$log"
			echo "fuzz: $target found a failing input (see above; the input is under $dir/testdata/fuzz/$target)" >&2
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
