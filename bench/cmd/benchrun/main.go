// Command benchrun runs the benchmark matrix against a service
// binary and a PostgreSQL server that bench/run.sh has prepared: every
// scenario at every concurrency for a fixed time, pgbench's ceiling scripts
// in between, the invariants after each run, statement and round-trip
// counts, CPU per order; then it writes docs/bench/REPORT.md's generated
// section and docs/bench/throughput.png.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ordersvc/ordersvc/bench/internal/load"
)

type options struct {
	api, dbURL, pgData, pgLog, customers, pgbench, scripts string
	out, raw, label, commit, pprofDir                      string
	duration, warmup                                       time.Duration
	concurrency                                            []int
	scenarios                                              []string
	apiEnv                                                 multi
	count                                                  int
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

// Results is everything one benchmark run measured.
type Results struct {
	Label    string    `json:"label"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Machine  Machine   `json:"machine"`
	Settings Settings  `json:"settings"`
	Counting Counting  `json:"counting"`
	Runs     []Run     `json:"runs"`
	HalfPeak *HalfPeak `json:"half_peak,omitempty"`
	Steady   *Steady   `json:"steady,omitempty"`
	Failed   bool      `json:"failed"`
}

// Machine is where the numbers come from.
type Machine struct {
	NProc    int     `json:"nproc"`
	CPUModel string  `json:"cpu_model"`
	MemGiB   float64 `json:"mem_gib"`
	Kernel   string  `json:"kernel"`
	Postgres string  `json:"postgres"`
	Go       string  `json:"go"`
	Commit   string  `json:"commit"`
}

// Settings of the run.
type Settings struct {
	Duration   string   `json:"duration"`
	Warmup     string   `json:"warmup"`
	APIEnv     []string `json:"api_env,omitempty"`
	PGSettings []string `json:"pg_settings"`
}

// Counting is what one request sends to PostgreSQL.
type Counting struct {
	Placement *Exchange `json:"placement,omitempty"`
	Replay    *Exchange `json:"replay,omitempty"`
	Pgbench   *Exchange `json:"pgbench,omitempty"`
}

// Exchange counts statements and round trips per request.
type Exchange struct {
	Requests   int      `json:"requests"`
	Statements float64  `json:"statements_per_request"`
	RoundTrips float64  `json:"round_trips_per_request"`
	Sequence   []string `json:"sequence"` // the statements of one request
}

// Run is one measured run.
type Run struct {
	Kind         string            `json:"kind"`     // service or pgbench
	Scenario     string            `json:"scenario"` // for pgbench: placement or hot
	Mode         string            `json:"mode"`
	Concurrency  int               `json:"concurrency"`
	Rate         float64           `json:"rate,omitempty"`
	Seconds      float64           `json:"seconds"`
	Throughput   float64           `json:"throughput"`
	Requests     int64             `json:"requests"`
	Orders       int64             `json:"orders"`
	ByStatus     map[string]int    `json:"by_status,omitempty"`
	Unexpected   int64             `json:"unexpected"`
	Examples     []string          `json:"examples,omitempty"`
	Latency      load.Percentiles  `json:"latency_ms"`
	PlaceLatency *load.Percentiles `json:"place_latency_ms,omitempty"`
	ReadLatency  *load.Percentiles `json:"read_latency_ms,omitempty"`
	CPU          CPU               `json:"cpu_seconds"`
	Invariants   *load.Invariants  `json:"invariants,omitempty"`
	Failed       bool              `json:"failed"`
	Why          []string          `json:"why,omitempty"`
}

// CPU seconds spent in the measured window.
type CPU struct {
	API      float64 `json:"api"`
	Postgres float64 `json:"postgres"`
	Client   float64 `json:"client"` // load generator or pgbench
	// Other is the CPU that the rest of the machine used meanwhile (other
	// users' builds and tests on a shared box): the noise in the figures.
	Other float64 `json:"other"`
}

// HalfPeak compares latency at half the service's peak spread throughput.
type HalfPeak struct {
	Rate    float64 `json:"rate"`
	Service Run     `json:"service"`
	Pgbench Run     `json:"pgbench"`
}

// variant is one service binary under test, with the environment it
// adds to the service's.
type variant struct {
	label, bin string
	env        []string
	res        *Results
}

type env struct {
	o         options
	variants  []*variant
	cur       *variant
	res       *Results
	conn      *pgx.Conn
	postmastr int
	customers []load.Actor
	products  []string
	hot       []string
	api       *apiProc
	apiMode   string
	apiOf     *variant
	seq       int
	// steady-state scenarios
	rcv           *receiver
	steadyEnv     []string
	historyActors []load.Actor
	// measureHook, when set, sees each service run's measured window open
	// and close.
	measureHook func(open bool)
}

func run(ctx context.Context, o options) error {
	if o.apis == "" && o.api == "" {
		return errors.New("need -api or -apis")
	}
	if o.dbURL == "" || o.pgData == "" || o.pgLog == "" || o.customers == "" {
		return errors.New("need -api, -db, -pgdata, -pglog and -customers (bench/run.sh passes them)")
	}
	for _, d := range []string{o.raw, filepath.Join(o.out, "history")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	e := &env{o: o}
	started := time.Now().UTC()
	if o.apis == "" {
		e.variants = []*variant{{label: o.label, bin: o.api}}
	} else {
		for _, kv := range strings.Split(o.apis, ",") {
			label, bin, ok := strings.Cut(kv, "=")
			if !ok {
				return fmt.Errorf("bad -apis entry %q", kv)
			}
			e.variants = append(e.variants, &variant{label: label, bin: bin})
		}
	}
	for _, v := range e.variants {
		v.res = &Results{Label: v.label, Started: started}
	}
	e.use(e.variants[0])
	var err error
	if e.postmastr, err = postmasterPID(o.pgData); err != nil {
		return fmt.Errorf("postmaster pid: %w", err)
	}
	if e.conn, err = pgx.Connect(ctx, o.dbURL); err != nil {
		return err
	}
	defer e.conn.Close(context.Background())
	if err := e.loadActors(); err != nil {
		return err
	}
	if err := e.prepareData(ctx); err != nil {
		return err
	}
	m, settings := machine(ctx, e.conn, o.commit), Settings{Duration: o.duration.String(), Warmup: o.warmup.String(), APIEnv: o.apiEnv, PGSettings: pgSettings(ctx, e.conn)}
	for _, v := range e.variants {
		v.res.Machine, v.res.Settings = m, settings
		if o.apis != "" {
			v.res.Machine.Commit = v.label
		}
	}
	defer e.stopAPI()
	if o.compare != "" {
		return e.compare(ctx)
	}

	throughput := slices.ContainsFunc(o.scenarios, func(s string) bool { return !isSteady(s) })
	for _, v := range e.variants {
		if !throughput {
			break // nothing to compare with pgbench: skip the counting phase
		}
		e.use(v)
		if err := e.count(ctx); err != nil {
			return fmt.Errorf("counting %s: %w", v.label, err)
		}
	}
	defer func() {
		if e.rcv != nil {
			_ = e.rcv.srv.Close()
		}
	}()
	for _, s := range o.scenarios {
		if isSteady(s) {
			for _, v := range e.variants {
				e.use(v)
				if err := e.steady(ctx, s); err != nil {
					return fmt.Errorf("%s: %w", s, err)
				}
			}
			continue
		}
		concurrency := o.concurrency
		if s == "dispatch" {
			concurrency = o.concurrency[len(o.concurrency)-1:] // the top one only
		}
		for _, c := range concurrency {
			for _, v := range e.variants {
				e.use(v)
				if err := e.serviceRun(ctx, s, c, 0); err != nil {
					return err
				}
			}
			if script := map[string]string{"spread": "placement", "hot": "hot", "nokeys": "nokeys"}[s]; script != "" && !o.noPgbench {
				if err := e.pgbenchRun(ctx, script, c, 0); err != nil {
					return err
				}
			}
		}
		if s == "spread" && !o.noPgbench && len(e.variants) == 1 {
			if err := e.halfPeak(ctx); err != nil {
				return err
			}
		}
	}
	e.stopAPI()
	failed := false
	for _, v := range e.variants {
		e.use(v)
		e.res.Finished = time.Now().UTC()
		for _, r := range e.res.Runs {
			e.res.Failed = e.res.Failed || r.Failed
		}
		if e.res.HalfPeak != nil {
			e.res.Failed = e.res.Failed || e.res.HalfPeak.Service.Failed || e.res.HalfPeak.Pgbench.Failed
		}
		if err := e.write(); err != nil {
			return err
		}
		failed = failed || e.res.Failed
	}
	if failed {
		return errors.New("FAILED: a run broke an invariant or got unexpected responses; see REPORT.md")
	}
	return nil
}

// use makes v the variant under test.
func (e *env) use(v *variant) {
	e.cur, e.res = v, v.res
}

func (e *env) loadActors() error {
	b, err := os.ReadFile(e.o.customers)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var a load.Actor
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			return fmt.Errorf("customers file: %w", err)
		}
		e.customers = append(e.customers, a)
	}
	if e.o.historyCustomers != "" {
		b, err := os.ReadFile(e.o.historyCustomers)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var a load.Actor
			if err := json.Unmarshal([]byte(line), &a); err != nil {
				return fmt.Errorf("history customers file: %w", err)
			}
			e.historyActors = append(e.historyActors, a)
		}
	}
	if len(e.customers) == 0 {
		return errors.New("no customers")
	}
	for n := 1; n <= load.NProducts; n++ {
		e.products = append(e.products, load.ProductID(n))
	}
	e.hot = []string{load.ProductID(load.HotBase + 1), load.ProductID(load.HotBase + 2)}
	return nil
}

func (e *env) prepareData(ctx context.Context) error {
	var seeded bool
	if err := e.conn.QueryRow(ctx, `SELECT to_regclass('bench_initial_stock') IS NOT NULL`).Scan(&seeded); err != nil {
		return err
	}
	if !seeded {
		if !e.o.seed {
			return errors.New("database not seeded")
		}
		log.Printf("seeding %d products", load.NProducts)
		if err := load.Seed(ctx, e.conn); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
	}
	return nil
}

// ensureAPI runs the service in mode "keys" or "nokeys", through addr
// (empty: straight to the database).
func (e *env) ensureAPI(ctx context.Context, mode, dbURL string) error {
	if e.api != nil && e.apiMode == mode && e.apiOf == e.cur {
		return nil
	}
	e.stopAPI()
	env := []string{}
	if strings.HasPrefix(mode, "steady-") {
		env = append(env, e.steadyEnv...)
	} else if mode != "dispatch" {
		// The outbox dispatcher works beside the placements, one statement
		// per event; held back, the runs compare the placement path with
		// pgbench's. The dispatch scenario runs it at its defaults.
		env = append(env, "OUTBOX_POLL_INTERVAL=1h")
	}
	env = append(env, e.o.apiEnv...)
	env = append(env, e.cur.env...)
	if strings.HasPrefix(mode, "nokeys") {
		env = append(env, "BENCH_DISABLE_IDEMPOTENCY=1")
	}
	if e.o.pprofDir != "" {
		env = append(env, "PPROF_ADDR=127.0.0.1:0")
		if addr, err := freePort(); err == nil {
			env[len(env)-1] = "PPROF_ADDR=" + addr
		}
	}
	if dbURL == "" {
		dbURL = e.o.dbURL
	}
	p, err := startAPI(ctx, e.cur.bin, dbURL, filepath.Join(e.o.raw, "api-"+e.cur.label+".log"), env)
	if err != nil {
		return err
	}
	e.api, e.apiMode, e.apiOf = p, mode, e.cur
	log.Printf("api %s %s on %s (pid %d)", e.cur.label, mode, p.addr, p.pid())
	return nil
}

func (e *env) stopAPI() {
	if e.api != nil {
		e.api.stop()
		e.api = nil
	}
}

func (e *env) loadConfig(scenario string, c int, rate float64) load.Config {
	e.seq++
	addr := ""
	if e.api != nil {
		addr = e.api.addr
	}
	return load.Config{
		Addr: addr, Scenario: scenario, Concurrency: c, Rate: rate,
		Warmup: e.o.warmup, Duration: e.o.duration, Customers: e.customers,
		Products: e.products, Hot: e.hot,
		RunID: fmt.Sprintf("%s-%d-%d", e.cur.label, time.Now().Unix(), e.seq), Seed: uint64(e.seq),
	}
}

// count measures, through the statement log and a counting proxy, what one
// placement, one replay and one pgbench transaction send to PostgreSQL.
func (e *env) count(ctx context.Context) error {
	u, err := url.Parse(e.o.dbURL)
	if err != nil {
		return err
	}
	proxy, err := newRTProxy(u.Host)
	if err != nil {
		return err
	}
	defer proxy.close()
	viaProxy := *u
	viaProxy.Host = proxy.addr()
	if err := load.Reset(ctx, e.conn); err != nil {
		return err
	}
	if err := e.ensureAPI(ctx, "keys-counting", viaProxy.String()); err != nil {
		return err
	}
	defer e.stopAPI()
	warm := e.loadConfig("spread", 1, 0)
	warm.Count = 50
	if _, err := load.Run(ctx, warm); err != nil {
		return err
	}
	if err := setLogStatement(ctx, e.conn, "all"); err != nil {
		return err
	}
	defer func() { _ = setLogStatement(context.Background(), e.conn, "none") }()

	measure := func(scenario string) (*Exchange, error) {
		cfg := e.loadConfig(scenario, 1, 0)
		cfg.Count = e.o.count
		var mark int64
		var turns int64
		cfg.OnMeasure = func(open bool) {
			if open {
				time.Sleep(100 * time.Millisecond) // let the log catch up with the preparation
				mark, turns = logMark(e.o.pgLog), proxy.turns.Load()
			} else {
				turns = proxy.turns.Load() - turns
			}
		}
		r, err := load.Run(ctx, cfg)
		if err != nil {
			return nil, err
		}
		if r.Unexpected > 0 {
			return nil, fmt.Errorf("%s counting run got unexpected responses: %v", scenario, r.Examples)
		}
		time.Sleep(300 * time.Millisecond)
		st, err := statements(e.o.pgLog, mark, "ordersvc")
		if err != nil {
			return nil, err
		}
		return exchange(st, e.o.count, turns), nil
	}
	if e.res.Counting.Placement, err = measure("spread"); err != nil {
		return err
	}
	if e.res.Counting.Replay, err = measure("replay"); err != nil {
		return err
	}
	// pgbench through the same proxy: its turns include connecting and
	// preparing the statements once.
	mark, turns := logMark(e.o.pgLog), proxy.turns.Load()
	pr, err := runPgbenchCount(ctx, e.o.pgbench, viaProxy.String(), filepath.Join(e.o.scripts, "placement.sql"), e.o.count)
	if err != nil {
		return fmt.Errorf("%w\n%s", err, pr)
	}
	turns = proxy.turns.Load() - turns
	time.Sleep(300 * time.Millisecond)
	st, err := statements(e.o.pgLog, mark, "pgbench")
	if err != nil {
		return err
	}
	e.res.Counting.Pgbench = exchange(st, e.o.count, turns)
	log.Printf("per placement: service %.2f statements / %.2f round trips; replay %.2f / %.2f; pgbench %.2f / %.2f",
		e.res.Counting.Placement.Statements, e.res.Counting.Placement.RoundTrips,
		e.res.Counting.Replay.Statements, e.res.Counting.Replay.RoundTrips,
		e.res.Counting.Pgbench.Statements, e.res.Counting.Pgbench.RoundTrips)
	return nil
}

func exchange(st []string, n int, turns int64) *Exchange {
	x := &Exchange{Requests: n, Statements: float64(len(st)) / float64(n), RoundTrips: float64(turns) / float64(n)}
	per := len(st) / n
	if per > 0 && len(st) >= 2*per {
		x.Sequence = st[per : 2*per] // the second request: the first may prepare
	} else {
		x.Sequence = st
	}
	return x
}

func runPgbenchCount(ctx context.Context, bin, dbURL, script string, n int) (string, error) {
	out, err := execOutput(ctx, bin, "-n", "-M", "prepared", "-c", "1", "-t", strconv.Itoa(n), "-f", script, dbURL)
	return out, err
}

func setLogStatement(ctx context.Context, conn *pgx.Conn, v string) error {
	if _, err := conn.Exec(ctx, `ALTER SYSTEM SET log_statement = '`+v+`'`); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
		return err
	}
	time.Sleep(300 * time.Millisecond)
	return nil
}

// snapshot of the CPU counters.
type snapshot struct{ api, pg, client, machine float64 }

func (e *env) snap() snapshot {
	s := snapshot{pg: postgresCPU(e.postmastr), client: selfCPU(), machine: machineCPU()}
	if e.api != nil {
		s.api = apiCPU(e.api.pid())
	}
	return s
}

// waitQuiet waits, up to -quiet-wait, until the processes outside the
// benchmark use less than a quarter of a core, so that a shared machine's
// other work disturbs the runs as little as it can.
func (e *env) waitQuiet(ctx context.Context) {
	deadline := time.Now().Add(e.o.quietWait)
	for {
		b := e.snap()
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		a := e.snap()
		other := (a.machine - b.machine) - (a.api - b.api) - (a.pg - b.pg) - (a.client - b.client)
		if other < 0.25 || time.Now().After(deadline) {
			if other >= 0.25 {
				log.Printf("machine still busy (%.1f cores used by other processes); running anyway", other)
			}
			return
		}
	}
}

func (e *env) serviceRun(ctx context.Context, scenario string, c int, rate float64) error {
	mode := "keys"
	if scenario == "nokeys" || scenario == "dispatch" {
		mode = scenario
	}
	if err := e.ensureAPI(ctx, mode, ""); err != nil {
		return err
	}
	if err := load.Reset(ctx, e.conn); err != nil {
		return err
	}
	e.waitQuiet(ctx)
	cfg := e.loadConfig(scenario, c, rate)
	var before, after snapshot
	var profDone chan struct{}
	cfg.OnMeasure = func(open bool) {
		if open {
			before = e.snap()
			profDone = e.profile(scenario, c, rate)
		} else {
			after = e.snap()
		}
		if e.measureHook != nil {
			e.measureHook(open)
		}
	}
	r, err := load.Run(ctx, cfg)
	if err != nil {
		return fmt.Errorf("%s c=%d: %w", scenario, c, err)
	}
	if profDone != nil {
		<-profDone
	}
	inv, err := load.Check(ctx, e.conn, scenario != "nokeys", r.FreshOrdersTotal, r.UncertainKeys)
	if err != nil {
		return err
	}
	run := Run{
		Kind: "service", Scenario: scenario, Mode: r.Mode, Concurrency: r.Concurrency, Rate: rate,
		Seconds: r.Seconds, Throughput: r.Throughput(), Requests: r.Requests, Orders: r.Orders,
		ByStatus: r.ByStatus, Unexpected: r.Unexpected, Examples: r.Examples, Latency: r.Latency,
		CPU: CPU{API: after.api - before.api, Postgres: after.pg - before.pg, Client: after.client - before.client,
			Other: max(0, (after.machine-before.machine)-(after.api-before.api)-(after.pg-before.pg)-(after.client-before.client))},
		Invariants: &inv,
	}
	if scenario == "mixed" {
		run.PlaceLatency, run.ReadLatency = &r.PlaceLatency, &r.ReadLatency
	}
	if scenario == "storm" {
		run.Concurrency = c // keys in flight; 8 clients each
	}
	judge(&run)
	e.add(run)
	return nil
}

// judge marks a run FAILED when an invariant broke or a response was not
// what the scenario expects.
func judge(r *Run) {
	if r.Invariants != nil && !r.Invariants.OK() {
		r.Failed = true
		r.Why = append(r.Why, r.Invariants.Violations...)
	}
	if r.Unexpected > 0 {
		r.Failed = true
		r.Why = append(r.Why, fmt.Sprintf("%d unexpected responses, e.g. %v", r.Unexpected, r.Examples))
	}
}

func (e *env) add(r Run) {
	status := "ok"
	if r.Failed {
		status = "FAILED: " + strings.Join(r.Why, "; ")
	}
	name := r.Scenario
	if r.Kind == "pgbench" {
		name = "pgbench " + r.Scenario
	}
	mode := "c=" + strconv.Itoa(r.Concurrency)
	if r.Mode == "open" {
		mode = fmt.Sprintf("rate=%.0f/s", r.Rate)
	}
	perK := 0.0
	if r.Orders > 0 {
		perK = 1000 * r.CPU.API / float64(r.Orders)
	}
	name = e.cur.label + " " + name
	if r.Kind == "pgbench" {
		name = r.Scenario + " (pgbench)"
	}
	log.Printf("%-30s %-12s %8.0f/s  p50 %6.2f  p99 %7.2f ms  cpu api %.1fs pg %.1fs client %.1fs other %.1fs (%.2f api-s/1k)  [%s] %s",
		name, mode, r.Throughput, r.Latency.P50, r.Latency.P99, r.CPU.API, r.CPU.Postgres, r.CPU.Client, r.CPU.Other, perK, statusLine(r.ByStatus), status)
	e.res.Runs = append(e.res.Runs, r)
}

func statusLine(m map[string]int) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, k+":"+strconv.Itoa(v))
	}
	return strings.Join(parts, " ")
}

func (e *env) pgbenchRun(ctx context.Context, script string, c int, rate float64) error {
	if err := load.Reset(ctx, e.conn); err != nil {
		return err
	}
	prefix := filepath.Join(e.o.raw, fmt.Sprintf("pgbench-%s-%s-c%d", e.cur.label, script, c))
	if rate > 0 {
		prefix += "-rate"
	}
	e.waitQuiet(ctx)
	before := e.snap()
	r, err := runPgbench(ctx, e.o.pgbench, e.o.dbURL, filepath.Join(e.o.scripts, scriptFile(script)), c, e.o.duration, rate, prefix)
	time.Sleep(200 * time.Millisecond) // let the backends exit and be reaped
	after := e.snap()
	if err != nil {
		return err
	}
	inv, err := load.Check(ctx, e.conn, script != "nokeys", r.Processed, 0)
	if err != nil {
		return err
	}
	run := Run{
		Kind: "pgbench", Scenario: script, Mode: "closed", Concurrency: c, Rate: rate,
		Seconds: e.o.duration.Seconds(), Throughput: r.TPS, Requests: r.Processed, Orders: r.Processed,
		Latency: r.Latency, Invariants: &inv,
		CPU: CPU{Postgres: after.pg - before.pg, Client: r.ClientCPU,
			Other: max(0, (after.machine-before.machine)-(after.pg-before.pg)-r.ClientCPU-(after.client-before.client))},
	}
	if rate > 0 {
		run.Mode = "open"
	}
	if r.Failed > 0 || r.Aborted {
		run.Unexpected = r.Failed
		run.Examples = []string{lastLines(r.Output, 3)}
	}
	judge(&run)
	cur := e.cur
	for i, v := range e.variants {
		e.use(v)
		if i == 0 {
			e.add(run)
		} else {
			e.res.Runs = append(e.res.Runs, run)
		}
	}
	e.use(cur)
	return nil
}

// halfPeak runs the service open loop at half its best spread throughput,
// and pgbench at the same rate, and compares their latencies.
func (e *env) halfPeak(ctx context.Context) error {
	peak := 0.0
	for _, r := range e.res.Runs {
		if r.Kind == "service" && r.Scenario == "spread" && r.Mode == "closed" {
			peak = math.Max(peak, r.Throughput)
		}
	}
	if peak == 0 {
		return nil
	}
	rate := math.Round(peak / 2)
	n := len(e.res.Runs)
	if err := e.serviceRun(ctx, "spread", 0, rate); err != nil {
		return err
	}
	if err := e.pgbenchRun(ctx, "placement", 16, rate); err != nil {
		return err
	}
	e.res.HalfPeak = &HalfPeak{Rate: rate, Service: e.res.Runs[n], Pgbench: e.res.Runs[n+1]}
	e.res.Runs = e.res.Runs[:n]
	return nil
}

// profile takes a CPU profile of the service for the run's duration when
// -pprof is set.
func (e *env) profile(scenario string, c int, rate float64) chan struct{} {
	if e.o.pprofDir == "" || e.api == nil {
		return nil
	}
	var addr string
	for _, kv := range e.api.cmd.Env {
		if v, ok := strings.CutPrefix(kv, "PPROF_ADDR="); ok {
			addr = v
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		secs := int(e.o.duration.Seconds()) - 1
		res, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, max(secs, 1)))
		if err != nil {
			log.Printf("profile: %v", err)
			return
		}
		defer res.Body.Close()
		_ = os.MkdirAll(e.o.pprofDir, 0o755)
		name := fmt.Sprintf("%s-%s-c%d.pprof", e.cur.label, scenario, c)
		if rate > 0 {
			name = fmt.Sprintf("%s-%s-rate%.0f.pprof", e.cur.label, scenario, rate)
		}
		f, err := os.Create(filepath.Join(e.o.pprofDir, name))
		if err != nil {
			return
		}
		defer f.Close()
		_, _ = io.Copy(f, res.Body)
	}()
	return done
}

func machine(ctx context.Context, conn *pgx.Conn, commit string) Machine {
	m := Machine{NProc: runtime.NumCPU(), Go: runtime.Version(), Commit: commit}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				m.CPUModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				kb, _ := strconv.ParseFloat(strings.Fields(v)[0], 64)
				m.MemGiB = math.Round(kb/1024/1024*10) / 10
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	_ = conn.QueryRow(ctx, `SELECT version()`).Scan(&m.Postgres)
	return m
}

func pgSettings(ctx context.Context, conn *pgx.Conn) []string {
	rows, err := conn.Query(ctx, `SELECT name || '=' || setting || coalesce(unit, '') FROM pg_settings
		WHERE name IN ('shared_buffers','max_connections','fsync','synchronous_commit','full_page_writes','wal_level','autovacuum')
		ORDER BY name`)
	if err != nil {
		return nil
	}
	out, _ := pgx.CollectRows(rows, pgx.RowTo[string])
	return out
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
