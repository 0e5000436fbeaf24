#!/usr/bin/env bash
# bench/pprof-groups.sh PROFILE… — where the service's CPU goes, by group.
#
# For each CPU profile (from BENCH_PPROF=dir: <label>-<scenario>-c<N>.pprof),
# prints the share of all samples whose stack holds a frame of each group
# (cumulative: a socket write under pgx counts in "pgx" and in "syscalls",
# so the groups overlap and do not add up to 100%). Used for the profile
# table in docs/bench/REPORT.md ("What a request costs, and why the goals
# are out of reach"). Needs only `go tool pprof`.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 PROFILE…" >&2; exit 2; }

# name;focus regexp;ignore regexp (may be empty)
GROUPS_=(
  "net/http outside the handler (parse, write, flush);net/http\.\(\*conn\)\.serve;ordersvc/ordersvc/internal"
  "the service's handlers (middleware to response);ordersvc/ordersvc/internal/httpapi;"
  "system calls (sockets, epoll, futex);syscall\.;"
  "pgx (encode, decode, protocol, its socket I/O);jackc/pgx;"
  "pgx without its system calls;jackc/pgx;syscall\."
  "JSON (encoding/json);encoding/json;"
  "fingerprint and sha256;sha256|[Ff]ingerprint;"
  "logging (slog, access log);log/slog;"
  "metrics (prometheus);prometheus;"
  "Go scheduler and netpoll;runtime\.(schedule|findRunnable|mcall|park_m|netpoll);"
  "GC and allocation;runtime\.(gcBgMarkWorker|mallocgc|gcAssist|bgsweep|bgscavenge);"
)

share() { # profile focus ignore -> "12.3"
  local args=(-top -nodecount=1000000 "-focus=$2")
  [ -z "$3" ] || args+=("-ignore=$3")
  go tool pprof "${args[@]}" "$1" 2>/dev/null |
    sed -n 's/.*Showing nodes accounting for [^,]*, \([0-9.]*\)% of .*/\1/p' | head -1
}

for p in "$@"; do
  total=$(go tool pprof -top -nodecount=1 "$p" 2>/dev/null | sed -n 's/.*Showing nodes accounting for [^,]*, [0-9.]*% of \(.*\) total/\1/p' | head -1)
  echo "== $(basename "$p") (${total:-?} of samples)"
  for g in "${GROUPS_[@]}"; do
    IFS=';' read -r name focus ignore <<<"$g"
    # The focus share is of the samples left after -ignore; with no match
    # pprof prints nothing.
    printf '  %-52s %6s%%\n' "$name" "$(share "$p" "$focus" "$ignore" || true)"
  done
done
