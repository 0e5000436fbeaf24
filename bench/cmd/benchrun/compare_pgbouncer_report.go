package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const (
	pgbouncerBegin = "<!-- BEGIN GENERATED pgbouncer comparison by bench/run.sh: do not edit between these markers -->"
	pgbouncerEnd   = "<!-- END GENERATED pgbouncer comparison -->"
	// pgbouncerGoal is the throughput through PgBouncer with two replicas,
	// as a fraction of one replica direct, that issue 10 asks for.
	pgbouncerGoal = 0.9
)

// writePoolerComparison stores the comparison as compare/pgbouncer.json and
// rewrites its section of REPORT.md.
func writePoolerComparison(out string, c *PoolerComparison) error {
	dir := filepath.Join(out, "compare")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, c.Name+".json"), b, 0o644); err != nil {
		return err
	}
	return writeSection(filepath.Join(out, "REPORT.md"), pgbouncerBegin, pgbouncerEnd, pgbouncerSection(c))
}

// totals sums the orders and measured seconds of one side over the rounds.
func (c *PoolerComparison) totals(alt bool) (orders int64, seconds float64) {
	for _, r := range c.Rounds {
		x := r.Baseline
		if alt {
			x = r.Alternative
		}
		orders += x.Orders
		seconds += x.Seconds
	}
	return orders, seconds
}

// Ratio is the alternative's throughput over the baseline's, over all rounds.
func (c *PoolerComparison) Ratio() float64 {
	bo, bs := c.totals(false)
	ao, as := c.totals(true)
	if bo == 0 || bs == 0 || as == 0 {
		return 0
	}
	return (float64(ao) / as) / (float64(bo) / bs)
}

func pgbouncerSection(c *PoolerComparison) string {
	var b strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }
	ratio := c.Ratio()
	goal := "meets"
	if ratio < pgbouncerGoal {
		goal = "**misses**"
	}
	status := "every run kept every invariant and got only expected responses"
	if c.Failed {
		status = "**FAILED**: a run broke an invariant or got unexpected responses (see the table)"
	}
	p("\n### Latest run: `%s`\n\n", c.Label)
	p("Run %s (commit `%s`, %d cores shared by the service processes, %s, PostgreSQL and the load generator), took %s; %s.\n",
		c.Started.Format("2006-01-02 15:04 UTC"), c.Machine.Commit, c.Machine.NProc, c.Pooler, c.Finished.Sub(c.Started).Round(1e9), status)
	p("Placements (scenario `%s`, closed loop, c=%d), %s measured after %s warm-up per run, alternating:\n\n", c.Scenario, c.Concurrency, c.Settings.Duration, c.Settings.Warmup)
	p("- **direct**: %s;\n- **pooled**: %s.\n\n", c.Baseline, c.Alternative)
	p("**Ratio pooled / direct: %.2f** (goal ≥ %.1f: %s it), over all rounds", ratio, pgbouncerGoal, goal)
	if len(c.Rounds) > 1 {
		lo, hi := 0.0, 0.0
		for i, r := range c.Rounds {
			x := r.Alternative.Throughput / r.Baseline.Throughput
			if i == 0 || x < lo {
				lo = x
			}
			if i == 0 || x > hi {
				hi = x
			}
		}
		p("; the rounds' own ratios range from %.2f to %.2f", lo, hi)
	}
	p(".\n\n")
	for _, alt := range []bool{false, true} {
		orders, secs := c.totals(alt)
		name, p99, pg := "direct", 0.0, 0.0
		if alt {
			name = "pooled"
		}
		for _, r := range c.Rounds {
			x := r.Baseline
			if alt {
				x = r.Alternative
			}
			p99 = max(p99, x.Latency.P99)
			pg += x.CPU.Postgres
		}
		p("- %s: %.0f orders/s, p99 at most %.0f ms, PostgreSQL %.2f ms of CPU per order;\n", name, float64(orders)/secs, p99, 1000*pg/float64(orders))
	}
	other, secs := 0.0, 0.0
	for _, r := range c.Rounds {
		other += r.Baseline.CPU.Other + r.Alternative.CPU.Other
		secs += r.Baseline.Seconds + r.Alternative.Seconds
	}
	p("- processes outside the benchmark used %.1f of the %d cores on average during the measured windows: the figures carry that noise.\n\n", other/secs, c.Machine.NProc)
	p("| round | deployment | orders/s | p50 ms | p99 ms | errors | CPU s: service | PostgreSQL | PostgreSQL ms/order | PgBouncer | load generator | other processes | invariants |\n")
	p("| ---: | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for i, r := range c.Rounds {
		for _, side := range []struct {
			name string
			run  Run
			pool string
		}{{"direct, 1 replica", r.Baseline, "–"}, {"pooled, 2 replicas", r.Alternative, fmt.Sprintf("%.1f", r.PoolerCPU)}} {
			x := side.run
			p("| %d | %s | %.0f | %.2f | %.2f | %s | %.1f | %.1f | %s | %s | %.1f | %.1f | %s |\n",
				i+1, side.name, x.Throughput, x.Latency.P50, x.Latency.P99, errorsOf(&x),
				x.CPU.API, x.CPU.Postgres, perK(x.CPU.Postgres, x.Orders), side.pool, x.CPU.Client, x.CPU.Other, verdict(&x))
		}
	}
	return b.String()
}

// pgbouncerReportOnly rewrites the comparison's section of REPORT.md from
// compare/pgbouncer.json, measuring nothing.
func pgbouncerReportOnly(o options) error {
	b, err := os.ReadFile(filepath.Join(o.out, "compare", "pgbouncer.json"))
	if err != nil {
		return err
	}
	var c PoolerComparison
	if err := json.Unmarshal(b, &c); err != nil {
		return err
	}
	return writeSection(filepath.Join(o.out, "REPORT.md"), pgbouncerBegin, pgbouncerEnd, pgbouncerSection(&c))
}
