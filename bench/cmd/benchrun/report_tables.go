package main

import (
	"fmt"
	"strings"
)

// md collects a Markdown section.
type md struct{ strings.Builder }

func (m *md) p(f string, a ...any) { fmt.Fprintf(&m.Builder, f, a...) }

// generated is the throughput section of REPORT.md: the latest run, what
// one request sends, the tables, the goals and the history of steps.
func generated(r *Results, hist []*Results) string {
	var m md
	m.header(r)
	m.counting(r.Counting)
	m.work(r.Counting.Work)
	m.throughput(r)
	m.halfPeak(r.HalfPeak)
	m.goals(r)
	if len(hist) > 1 {
		m.history(hist)
	}
	m.p("\n![throughput vs concurrency](throughput.png)\n\n")
	return m.String()
}

func (m *md) header(r *Results) {
	status := "all runs kept every invariant and got only expected responses"
	if r.Failed {
		status = "**FAILED**: at least one run broke an invariant or got unexpected responses (see the tables)"
	}
	m.p("\n## Latest run: `%s`\n\n", r.Label)
	m.p("%s. Started %s, took %s.\n\n", status, r.Started.Format("2006-01-02 15:04 UTC"), r.Finished.Sub(r.Started).Round(1e9))
	mc := r.Machine
	m.p("| machine | |\n| --- | --- |\n")
	m.p("| nproc | %d |\n| CPU | %s |\n| memory | %.1f GiB |\n| kernel | %s |\n| PostgreSQL | %s |\n| Go | %s |\n| commit | `%s` |\n",
		mc.NProc, mc.CPUModel, mc.MemGiB, mc.Kernel, mc.Postgres, mc.Go, mc.Commit)
	m.p("| run length | %s measured after %s warm-up, per scenario and concurrency |\n", r.Settings.Duration, r.Settings.Warmup)
	m.p("| server settings | %s |\n", strings.Join(r.Settings.PGSettings, ", "))
	if len(r.Settings.APIEnv) > 0 {
		m.p("| service env | %s |\n", strings.Join(r.Settings.APIEnv, ", "))
	}
	m.p("\nService, PostgreSQL and load generator share the same %d cores; every run starts from the same data (reset, VACUUM, CHECKPOINT).\n", mc.NProc)
}

func (m *md) counting(c Counting) {
	if c.Placement == nil {
		return
	}
	m.p("\n### What one request sends to PostgreSQL\n\n")
	m.p("Counted over %d requests at concurrency 1: statements from the server's `log_statement=all` log, round trips by a TCP proxy that counts every change of direction client→server.\n\n", c.Placement.Requests)
	m.p("| request | statements | round trips |\n| --- | ---: | ---: |\n")
	m.p("| service: placement (POST /v1/orders, fresh key) | %.2f | %.2f |\n", c.Placement.Statements, c.Placement.RoundTrips)
	if c.Replay != nil {
		m.p("| service: replay (same key again) | %.2f | %.2f |\n", c.Replay.Statements, c.Replay.RoundTrips)
	}
	if c.Pgbench != nil {
		m.p("| pgbench placement script (per-statement ceiling) | %.2f | %.2f |\n", c.Pgbench.Statements, c.Pgbench.RoundTrips)
	}
	if c.Pipelined != nil {
		m.p("| pgbench pipelined placement script (one round trip per order) | %.2f | %.2f |\n", c.Pipelined.Statements, c.Pipelined.RoundTrips)
	}
	m.p("\nStatements of one placement, in order:\n\n| # | service | pgbench script |\n| ---: | --- | --- |\n")
	var pg []string
	if c.Pgbench != nil {
		pg = c.Pgbench.Sequence
	}
	for i := 0; i < max(len(c.Placement.Sequence), len(pg)); i++ {
		a, b := "", ""
		if i < len(c.Placement.Sequence) {
			a = "`" + c.Placement.Sequence[i] + "`"
		}
		if i < len(pg) {
			b = "`" + pg[i] + "`"
		}
		m.p("| %d | %s | %s |\n", i+1, a, b)
	}
	if c.Replay != nil {
		m.p("\nStatements of one replay: %s.\n", "`"+strings.Join(c.Replay.Sequence, "`, `")+"`")
	}
}

func (m *md) throughput(r *Results) {
	m.p("\n### Throughput, latency, errors, CPU\n\n")
	m.p("Throughput is orders per second (replay: replayed responses; storm: keys, each sent by 8 clients at once; mixed: requests). ")
	m.p("The ratio compares with pgbench running the ceiling script at the same concurrency (hot: the hot script; no-keys: the script without the key statements); replay, storm and mixed do other work and have none. ")
	m.p("Spread placements have a second reference, the pipelined script: the same statements in one `\\startpipeline … \\endpipeline`, one round trip per order (`bench/pgbench/placement_pipelined.sql`). ")
	m.p("CPU is seconds per 1,000 orders (replay: per 1,000 replays) in the measured window: `api` is the service process, `pg` all PostgreSQL processes, `client` the load generator or pgbench.\n\n")
	m.p("`other` is CPU used meanwhile by processes outside the benchmark (in cores, averaged over the window): on a shared machine it is the noise to read the row with.\n\n")
	m.p("| scenario | c | throughput/s | ratio to pgbench | ratio to pipelined | p50 ms | p95 ms | p99 ms | errors (non-2xx) | api CPU s/1k | pg CPU s/1k | client CPU s/1k | other cores | invariants |\n")
	m.p("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | --- |\n")
	for _, key := range runKeys(r) {
		kind, scen, _ := strings.Cut(key, ":")
		for _, c := range r.concurrencies() {
			if x := r.find(kind, scen, c); x != nil {
				m.throughputRow(r, x, c)
			}
		}
	}
	m.scenarioNotes(r)
}

// runKeys lists the kind:scenario pairs of r's runs in the order first run.
func runKeys(r *Results) []string {
	var order []string
	seen := map[string]bool{}
	for _, x := range r.Runs {
		key := x.Kind + ":" + x.Scenario
		if !seen[key] {
			seen[key] = true
			order = append(order, key)
		}
	}
	return order
}

func (m *md) throughputRow(r *Results, x *Run, c int) {
	name, rat, pip := x.Scenario, "–", "–"
	if x.Kind == "pgbench" {
		name = "pgbench " + x.Scenario
	} else {
		if cs := ceiling(x.Scenario); cs != "" {
			if g := r.find("pgbench", cs, c); g != nil {
				rat = ratio(x.Throughput, g.Throughput)
			}
		}
		if g := r.find("pgbench", "pipelined", c); g != nil && x.Scenario == "spread" {
			pip = ratio(x.Throughput, g.Throughput)
		}
	}
	work := x.Orders
	if x.Scenario == "replay" || x.Scenario == "mixed" {
		work = x.Requests
	}
	cc := fmt.Sprint(c)
	if x.Scenario == "storm" {
		cc = fmt.Sprintf("%d×8", c)
	}
	m.p("| %s | %s | %.0f | %s | %s | %.2f | %.2f | %.2f | %s | %s | %s | %s | %.2f | %s |\n", name, cc, x.Throughput, rat, pip,
		x.Latency.P50, x.Latency.P95, x.Latency.P99, errorsOf(x), perK(x.CPU.API, work), perK(x.CPU.Postgres, work),
		perK(x.CPU.Client, work), x.CPU.Other/x.Seconds, verdict(x))
}

func (m *md) scenarioNotes(r *Results) {
	for _, c := range r.concurrencies() {
		if x := r.find("service", "dispatch", c); x != nil && x.Invariants != nil {
			m.p("\ndispatch c=%d: the outbox dispatcher ran beside the placements at its defaults; when the run ended %d events were delivered and %d still pending (%.0f placed in all).",
				c, x.Invariants.OutboxDelivered, x.Invariants.OutboxPending, float64(x.Invariants.Orders))
		}
	}
	for _, c := range r.concurrencies() {
		if x := r.find("service", "mixed", c); x != nil && x.PlaceLatency != nil {
			m.p("\nmixed c=%d: placements p50/p99 %.2f/%.2f ms, reads p50/p99 %.2f/%.2f ms.", c, x.PlaceLatency.P50, x.PlaceLatency.P99, x.ReadLatency.P50, x.ReadLatency.P99)
		}
	}
	m.p("\n")
}

func (m *md) halfPeak(hp *HalfPeak) {
	if hp == nil {
		return
	}
	m.p("\n### Latency at half of peak throughput (open loop, %.0f orders/s)\n\n", hp.Rate)
	m.p("The service gets spread placements on a fixed schedule (64 connections); pgbench runs the ceiling script at the same rate (`-R`, 16 clients). Latency counts from the scheduled start in both.\n\n")
	m.p("| | achieved/s | p50 ms | p95 ms | p99 ms | p99.9 ms | errors | invariants |\n| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |\n")
	for _, x := range []*Run{&hp.Service, &hp.Pgbench} {
		m.p("| %s | %.0f | %.2f | %.2f | %.2f | %.2f | %s | %s |\n", x.Kind, x.Throughput, x.Latency.P50, x.Latency.P95, x.Latency.P99, x.Latency.P999, errorsOf(x), verdict(x))
	}
}
