package main

import (
	"context"
	"fmt"
	"log"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ordersvc/ordersvc/bench/internal/load"
)

// Work is what one request costs PostgreSQL, from pg_stat_statements
// (reset before the requests, read after them) and the CPU counters, over
// -work-count requests at concurrency 1 straight to the server.
type Work struct {
	Case     string `json:"case"`
	Requests int    `json:"requests"`
	// Per request: the statements' executor and planner time, the
	// PostgreSQL processes' CPU (everything the server did: protocol,
	// parsing, the executor, commit), the service's CPU and the latency the
	// client saw.
	ExecMs    float64 `json:"exec_ms"`
	PlanMs    float64 `json:"plan_ms"`
	PgCPUMs   float64 `json:"pg_cpu_ms"`
	APICPUMs  float64 `json:"api_cpu_ms"`
	P50Ms     float64 `json:"p50_ms"`
	MeanMs    float64 `json:"mean_ms"`
	Calls     float64 `json:"calls"`
	KeysShare float64 `json:"keys_share"` // of exec + plan time, in the key statements
	// Statements, by name (the sqlc name, or the normalized text's start).
	Statements []StmtWork `json:"statements"`
}

// StmtWork is one statement's cost per request.
type StmtWork struct {
	Name      string  `json:"name"`
	Keys      bool    `json:"keys"` // an idempotency-key statement
	Calls     float64 `json:"calls"`
	ExecMs    float64 `json:"exec_ms"`
	PlanMs    float64 `json:"plan_ms"`
	Plans     float64 `json:"plans"`
	Rows      float64 `json:"rows"`
	BlksHit   float64 `json:"shared_blks_hit"`
	WALBytes  float64 `json:"wal_bytes"`
	WALRecord float64 `json:"wal_records"`
}

// workCase is one row of the phase: a service scenario in a service mode
// (and connection string), or a pgbench script.
type workCase struct {
	name, scenario, mode, query string // query: added to the service's DATABASE_URL
	script                      string // pgbench script instead of the service
}

var workCases = []workCase{
	{name: "placement", scenario: "spread", mode: "keys"},
	{name: "replay", scenario: "replay", mode: "keys"},
	{name: "order read", scenario: "read", mode: "keys"},
	{name: "no-keys placement", scenario: "nokeys", mode: "nokeys"},
	{name: "placement, cache_describe", scenario: "spread", mode: "keys-describe", query: "default_query_exec_mode=cache_describe"},
	{name: "placement, force_generic_plan", scenario: "spread", mode: "keys-generic", query: "plan_cache_mode=force_generic_plan"},
	{name: "GET /livez", scenario: "livez", mode: "keys"},
	{name: "pgbench pipelined", script: "pipelined"},
	{name: "pgbench placement", script: "placement"},
	{name: "pgbench nokeys", script: "nokeys"},
}

// statWork measures every work case when the server has pg_stat_statements.
func (e *env) statWork(ctx context.Context) error {
	var ok bool
	if err := e.conn.QueryRow(ctx, `SELECT current_setting('shared_preload_libraries') LIKE '%pg_stat_statements%'`).Scan(&ok); err != nil || !ok {
		log.Printf("pg_stat_statements not preloaded: no per-statement work figures")
		return err
	}
	if _, err := e.conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		return err
	}
	// The throughput runs leave the statistics off (bench/run.sh starts the
	// server with pg_stat_statements.track = none): on for this phase only.
	if err := setPGSS(ctx, e, "all", "on"); err != nil {
		return err
	}
	defer func() { _ = setPGSS(context.Background(), e, "none", "off") }()
	defer e.stopAPI()
	e.res.Counting.Work = nil
	for _, wc := range workCases {
		if err := load.Reset(ctx, e.conn); err != nil {
			return err
		}
		var w *Work
		var err error
		if wc.script != "" {
			w, err = e.workPgbench(ctx, wc)
		} else {
			w, err = e.workService(ctx, wc)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", wc.name, err)
		}
		log.Printf("%-26s %5.2f statements, exec %.3f plan %.3f pg cpu %.3f api cpu %.3f ms, p50 %.3f ms, keys %.0f%%",
			w.Case, w.Calls, w.ExecMs, w.PlanMs, w.PgCPUMs, w.APICPUMs, w.P50Ms, 100*w.KeysShare)
		e.res.Counting.Work = append(e.res.Counting.Work, w)
	}
	return nil
}

// workService warms the service up, then resets the statistics and sends
// -work-count requests of the case's scenario at concurrency 1.
func (e *env) workService(ctx context.Context, wc workCase) (*Work, error) {
	dbURL := ""
	if wc.query != "" {
		dbURL = e.o.dbURL + "&" + wc.query
		if !strings.Contains(e.o.dbURL, "?") {
			dbURL = e.o.dbURL + "?" + wc.query
		}
	}
	if err := e.ensureAPI(ctx, wc.mode, dbURL); err != nil {
		return nil, err
	}
	warm := e.loadConfig(wc.scenario, 1, 0)
	warm.Count = 100
	if _, err := load.Run(ctx, warm); err != nil {
		return nil, err
	}
	cfg := e.loadConfig(wc.scenario, 1, 0)
	cfg.Count = e.o.workCount
	var before, after snapshot
	var resetErr error
	cfg.OnMeasure = func(open bool) {
		if open {
			_, resetErr = e.conn.Exec(ctx, `SELECT pg_stat_statements_reset()`)
			before = e.snap()
		} else {
			after = e.snap()
		}
	}
	r, err := load.Run(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if resetErr != nil {
		return nil, resetErr
	}
	if r.Unexpected > 0 {
		return nil, fmt.Errorf("unexpected responses: %v", r.Examples)
	}
	w, err := e.readWork(ctx, wc.name, int(r.Requests))
	if err != nil {
		return nil, err
	}
	n := float64(r.Requests)
	w.PgCPUMs, w.APICPUMs = 1000*(after.pg-before.pg)/n, 1000*(after.api-before.api)/n
	w.P50Ms, w.MeanMs = r.Latency.P50, r.Latency.Mean
	return w, nil
}

var pgbenchLatency = regexp.MustCompile(`latency average = ([0-9.]+) ms`)

// workPgbench runs -work-count transactions of a pgbench script on one client.
func (e *env) workPgbench(ctx context.Context, wc workCase) (*Work, error) {
	e.stopAPI()
	if _, err := e.conn.Exec(ctx, `SELECT pg_stat_statements_reset()`); err != nil {
		return nil, err
	}
	before := e.snap()
	out, err := runPgbenchCount(ctx, e.o.pgbench, e.o.dbURL, filepath.Join(e.o.scripts, scriptFile(wc.script)), e.o.workCount)
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, out)
	}
	time.Sleep(300 * time.Millisecond) // the backend's CPU counts once the postmaster reaps it
	after := e.snap()
	w, err := e.readWork(ctx, wc.name, e.o.workCount)
	if err != nil {
		return nil, err
	}
	w.PgCPUMs = 1000 * (after.pg - before.pg) / float64(e.o.workCount)
	if m := pgbenchLatency.FindStringSubmatch(out); m != nil {
		w.MeanMs, _ = strconv.ParseFloat(m[1], 64)
	}
	return w, nil
}

// readWork reads pg_stat_statements' top-level statements (the harness's
// own reset and read left out) and divides them by the requests.
func (e *env) readWork(ctx context.Context, name string, n int) (*Work, error) {
	time.Sleep(200 * time.Millisecond)
	rows, err := e.conn.Query(ctx, `
SELECT query, calls, total_exec_time, total_plan_time, plans, rows, shared_blks_hit, wal_bytes::float8, wal_records
FROM pg_stat_statements
WHERE toplevel AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND query NOT LIKE '%pg_stat_statements%'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	w := &Work{Case: name, Requests: n}
	byName := map[string]*StmtWork{}
	f := float64(n)
	for rows.Next() {
		var q string
		var calls, plans, nrows, hit, walRecords int64
		var exec, plan, wal float64
		if err := rows.Scan(&q, &calls, &exec, &plan, &plans, &nrows, &hit, &wal, &walRecords); err != nil {
			return nil, err
		}
		nm := stmtName(q)
		s := byName[nm]
		if s == nil {
			s = &StmtWork{Name: nm, Keys: keyStatement(nm, q)}
			byName[nm] = s
		}
		s.Calls += float64(calls) / f
		s.ExecMs += exec / f
		s.PlanMs += plan / f
		s.Plans += float64(plans) / f
		s.Rows += float64(nrows) / f
		s.BlksHit += float64(hit) / f
		s.WALBytes += wal / f
		s.WALRecord += float64(walRecords) / f
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var keys float64
	for _, s := range byName {
		w.Statements = append(w.Statements, *s)
		w.Calls += s.Calls
		w.ExecMs += s.ExecMs
		w.PlanMs += s.PlanMs
		if s.Keys {
			keys += s.ExecMs + s.PlanMs
		}
	}
	if t := w.ExecMs + w.PlanMs; t > 0 {
		w.KeysShare = keys / t
	}
	sort.Slice(w.Statements, func(i, j int) bool { return w.Statements[i].ExecMs > w.Statements[j].ExecMs })
	return w, nil
}

// stmtName is the sqlc name of a statement ("-- name: X"), or the start of
// its normalized text.
func stmtName(q string) string {
	if _, rest, ok := strings.Cut(q, "-- name: "); ok {
		nm, _, _ := strings.Cut(rest, " ")
		return nm
	}
	q = strings.Join(strings.Fields(q), " ")
	if len(q) > 60 {
		q = q[:60] + "…"
	}
	return q
}

// keyStatement tells the idempotency-key statements: the service's
// Idempotency* queries; in the pgbench scripts, those on idempotency_keys
// and the lock_timeout pair around the claim (set_config alone).
func keyStatement(name, q string) bool {
	if strings.HasPrefix(name, "Idempotency") {
		return true
	}
	if strings.Contains(q, "-- name: ") {
		return false
	}
	q = strings.Join(strings.Fields(q), " ")
	return strings.Contains(q, "idempotency_keys") || q == "SELECT set_config($1, $2::text, $3)"
}

func setPGSS(ctx context.Context, e *env, track, planning string) error {
	for _, q := range []string{
		`ALTER SYSTEM SET pg_stat_statements.track = '` + track + `'`,
		`ALTER SYSTEM SET pg_stat_statements.track_planning = '` + planning + `'`,
		`SELECT pg_reload_conf()`,
	} {
		if _, err := e.conn.Exec(ctx, q); err != nil {
			return err
		}
	}
	time.Sleep(300 * time.Millisecond)
	return nil
}
