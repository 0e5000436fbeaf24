// Command benchrun runs the benchmark matrix against a service
// binary and a PostgreSQL server that bench/run.sh has prepared: every
// scenario at every concurrency for a fixed time, pgbench's ceiling scripts
// in between, the invariants after each run, statement and round-trip
// counts, CPU per order; then it writes docs/bench/REPORT.md's generated
// section and docs/bench/throughput.png.
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ordersvc/ordersvc/bench/internal/load"
)

type options struct {
	api, dbURL, pgData, pgLog, customers, pgbench, scripts string
	out, raw, label, commit, pprofDir                      string
	duration, warmup                                       time.Duration
	concurrency                                            []int
	scenarios                                              []string
	apiEnv                                                 multi
	count, workCount                                       int
	seed                                                   bool
	quietWait                                              time.Duration
	noPgbench                                              bool
	apis                                                   string
	reportOnly                                             bool
	// steady-state scenarios
	drainEvents, historyOrders int
	soak, soakTTL              time.Duration
	soakFraction, soakRate     float64
	historyCustomers           string
	// comparisons (compare.go, compare_pgbouncer.go)
	compare, pgbouncerBin string
	compareRounds         int
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	log.SetFlags(log.Ltime)
	o := parseOptions()
	if o.reportOnly && o.compare == "pgbouncer" {
		if err := pgbouncerReportOnly(o); err != nil {
			log.Fatal(err)
		}
		return
	}
	if o.reportOnly {
		if err := reportOnly(o); err != nil {
			log.Fatal(err)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		log.Fatal(err)
	}
}

// parseOptions reads the command line; bench/run.sh maps the BENCH_*
// variables onto these flags.
func parseOptions() options {
	var o options
	var conc, scen string
	flag.StringVar(&o.api, "api", "", "path of the api binary")
	flag.StringVar(&o.dbURL, "db", "", "connection string of the benchmark database (superuser)")
	flag.StringVar(&o.pgData, "pgdata", "", "data directory of the server (for postmaster.pid)")
	flag.StringVar(&o.pgLog, "pglog", "", "server log file (log_line_prefix must contain '] %a ')")
	flag.StringVar(&o.customers, "customers", "", "file of `api actor create` outputs, one JSON object a line")
	flag.StringVar(&o.pgbench, "pgbench", "pgbench", "pgbench binary")
	flag.StringVar(&o.scripts, "scripts", "bench/pgbench", "directory of the pgbench scripts")
	flag.StringVar(&o.out, "out", "docs/bench", "where REPORT.md, throughput.png and history/ go")
	flag.StringVar(&o.raw, "raw", "docs/bench/raw", "where raw outputs go (gitignored)")
	flag.StringVar(&o.label, "label", "current", "name of this measurement in the optimisation history")
	flag.StringVar(&o.commit, "commit", "", "git commit measured")
	flag.StringVar(&o.pprofDir, "pprof", "", "when set, take a CPU profile of the service during each run into this directory")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "measured time of each run")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured warm-up before each service run")
	flag.StringVar(&conc, "concurrency", "1,8,32", "concurrencies")
	flag.StringVar(&scen, "scenarios", strings.Join(load.Scenarios, ","), "scenarios")
	flag.Var(&o.apiEnv, "api-env", "KEY=VALUE added to the service's environment (repeatable)")
	flag.IntVar(&o.count, "count", 300, "placements in the statement/round-trip counting phase")
	flag.IntVar(&o.workCount, "work-count", 1000, "requests of each kind in the pg_stat_statements phase")
	flag.BoolVar(&o.seed, "seed", true, "seed the database when it has no benchmark data yet")
	flag.StringVar(&o.apis, "apis", "", "label=path,label=path,…: measure several service binaries in rotation, each (scenario, concurrency) cell running every one back to back and sharing one pgbench run; -api and -label are then ignored")
	flag.BoolVar(&o.reportOnly, "report-only", false, "regenerate REPORT.md and throughput.png from history/<label>.json, measuring nothing")
	flag.BoolVar(&o.noPgbench, "no-pgbench", false, "skip pgbench and the half-peak latency runs (quick experiments)")
	flag.IntVar(&o.drainEvents, "drain-events", 50000, "drain: backlog of pending events")
	flag.IntVar(&o.historyOrders, "history-orders", 100000, "history: orders of the heavy customer's history")
	flag.DurationVar(&o.soak, "soak", 10*time.Minute, "soak: length")
	flag.DurationVar(&o.soakTTL, "soak-ttl", 2*time.Minute, "soak: IDEMPOTENCY_TTL and OUTBOX_RETENTION of the service")
	flag.Float64Var(&o.soakFraction, "soak-fraction", 0.7, "soak: rate as a fraction of the peak found by lag")
	flag.Float64Var(&o.soakRate, "soak-rate", 0, "soak: fixed rate (placements/s), overriding -soak-fraction")
	flag.StringVar(&o.historyCustomers, "history-customers", "", "history: file with two `api actor create` outputs used by no other scenario (heavy, fresh)")
	flag.StringVar(&o.compare, "compare", "", "instead of the scenarios, compare two configurations of the service under the spread load at the top concurrency, alternating: tracing (off vs on, exporting to an in-process OTLP receiver); pgbouncer (1 replica direct vs 2 through PgBouncer in transaction mode)")
	flag.IntVar(&o.compareRounds, "compare-rounds", 2, "compare: rounds, each running both sides for -duration")
	flag.StringVar(&o.pgbouncerBin, "pgbouncer-bin", "/usr/sbin/pgbouncer", "-compare pgbouncer: the pgbouncer binary")
	flag.DurationVar(&o.quietWait, "quiet-wait", 15*time.Second, "before each run, wait up to this long for other processes on the machine to use less than 0.25 cores")
	flag.Parse()
	for _, c := range strings.Split(conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			log.Fatalf("bad -concurrency %q", conc)
		}
		o.concurrency = append(o.concurrency, n)
	}
	for _, s := range strings.Split(scen, ",") {
		if s = strings.TrimSpace(s); s == "steady" {
			o.scenarios = append(o.scenarios, steadyScenarios...)
		} else if s != "" {
			o.scenarios = append(o.scenarios, s)
		}
	}
	return o
}
