package main

import "fmt"

// goal is one row of the goals table: reported, never asserted.
func (m *md) goal(name, target, measured string, ok bool) {
	mark := "yes"
	if !ok {
		mark = "**no**"
	}
	m.p("| %s | %s | %s | %s |\n", name, target, measured, mark)
}

func (m *md) goals(r *Results) {
	m.p("\n### Goals (reported, not asserted)\n\n")
	m.p("| goal | target | measured | met |\n| --- | --- | --- | --- |\n")
	m.ceilingGoals(r)
	for _, c := range r.concurrencies() {
		if s, n := r.find("service", "spread", c), r.find("service", "nokeys", c); s != nil && n != nil && n.Throughput > 0 {
			cost := 1 - s.Throughput/n.Throughput
			measured := fmt.Sprintf("%.1f%%", 100*cost)
			if gs, gn := r.find("pgbench", "placement", c), r.find("pgbench", "nokeys", c); gs != nil && gn != nil && gn.Throughput > 0 {
				measured += fmt.Sprintf(" (pgbench: the same statements cost %.1f%%)", 100*(1-gs.Throughput/gn.Throughput))
			}
			m.goal(fmt.Sprintf("keys cost at c=%d (1 − spread/no-keys)", c), "≤ 10%", measured, cost <= 0.10)
		}
	}
	for _, c := range r.concurrencies() {
		if s, x := r.find("service", "spread", c), r.find("service", "replay", c); s != nil && x != nil && s.Throughput > 0 {
			m.goal(fmt.Sprintf("replay c=%d vs placement", c), "≥ 5×", fmt.Sprintf("%.1f×", x.Throughput/s.Throughput), x.Throughput >= 5*s.Throughput)
		}
	}
	for _, c := range r.concurrencies() {
		if s, g := r.find("service", "hot", c), r.find("pgbench", "hot", c); s != nil && g != nil {
			m.goal(fmt.Sprintf("hot c=%d vs pgbench hot", c), "≥ 0.8", ratio(s.Throughput, g.Throughput), s.Throughput >= 0.8*g.Throughput)
		}
	}
	if hp := r.HalfPeak; hp != nil && hp.Pgbench.Latency.P99 > 0 {
		x := hp.Service.Latency.P99 / hp.Pgbench.Latency.P99
		m.goal("p99 at half peak vs pgbench p99", "≤ 3×", fmt.Sprintf("%.1f× (%.2f vs %.2f ms)", x, hp.Service.Latency.P99, hp.Pgbench.Latency.P99), x <= 3)
	}
	errs, failed := unexpected(r)
	m.goal("no errors except expected 409s", "0", fmt.Sprintf("%d unexpected statuses, %d failed runs", errs, failed), errs == 0 && failed == 0)
}

// ceilingGoals compares spread placements with both pgbench references:
// the per-statement script and the pipelined one (one round trip per order).
func (m *md) ceilingGoals(r *Results) {
	for _, c := range []int{8, 32} {
		if s, g := r.find("service", "spread", c), r.find("pgbench", "placement", c); s != nil && g != nil {
			m.goal(fmt.Sprintf("spread c=%d vs pgbench", c), "≥ 0.8 (stretch ≥ 1.0)", ratio(s.Throughput, g.Throughput), s.Throughput >= 0.8*g.Throughput)
		}
	}
	for _, c := range r.concurrencies() {
		s, g := r.find("service", "spread", c), r.find("pgbench", "pipelined", c)
		if s == nil || g == nil {
			continue
		}
		want := 1.0
		if c == 1 {
			want = 0.9
		}
		m.goal(fmt.Sprintf("spread c=%d vs pipelined ceiling", c), fmt.Sprintf("≥ %.1f", want), ratio(s.Throughput, g.Throughput), s.Throughput >= want*g.Throughput)
	}
}

// unexpected counts the statuses other than 2xx and 409 and the failed runs.
func unexpected(r *Results) (errs, failed int) {
	for _, x := range r.Runs {
		for k, n := range x.ByStatus {
			if k[0] != '2' && k != "409" {
				errs += n
			}
		}
		if x.Failed {
			failed++
		}
	}
	return errs, failed
}

func (m *md) history(hist []*Results) {
	m.p("\n### Optimisation history (one row per measured step, oldest first)\n\n")
	m.p("| step | placement RT | spread c=1 | c=8 | c=32 | vs pgbench c=8 / c=32 | vs pipelined c=1 / c=8 / c=32 | hot c=32 vs pgbench | replay c=32 | keys cost c=32 | api CPU s/1k (spread c=32) | pg CPU s/1k | p99 half-peak svc/pgbench ms |\n")
	m.p("| --- | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for _, h := range hist {
		m.historyRow(h)
	}
}

func (m *md) historyRow(h *Results) {
	rt := "–"
	if h.Counting.Placement != nil {
		rt = fmt.Sprintf("%.1f", h.Counting.Placement.RoundTrips)
	}
	tp := func(s string, c int) string {
		if x := h.find("service", s, c); x != nil {
			return fmt.Sprintf("%.0f", x.Throughput)
		}
		return "–"
	}
	rat := func(s, g string, c int) string {
		x, y := h.find("service", s, c), h.find("pgbench", g, c)
		if x == nil || y == nil {
			return "–"
		}
		return ratio(x.Throughput, y.Throughput)
	}
	cost := "–"
	if s, n := h.find("service", "spread", 32), h.find("service", "nokeys", 32); s != nil && n != nil && n.Throughput > 0 {
		cost = fmt.Sprintf("%.0f%%", 100*(1-s.Throughput/n.Throughput))
	}
	apiK, pgK := "–", "–"
	if x := h.find("service", "spread", 32); x != nil {
		apiK, pgK = perK(x.CPU.API, x.Orders), perK(x.CPU.Postgres, x.Orders)
	}
	hp := "–"
	if h.HalfPeak != nil {
		hp = fmt.Sprintf("%.1f / %.1f", h.HalfPeak.Service.Latency.P99, h.HalfPeak.Pgbench.Latency.P99)
	}
	m.p("| `%s` | %s | %s | %s | %s | %s / %s | %s / %s / %s | %s | %s | %s | %s | %s | %s |\n", h.Label, rt, tp("spread", 1), tp("spread", 8), tp("spread", 32),
		rat("spread", "placement", 8), rat("spread", "placement", 32),
		rat("spread", "pipelined", 1), rat("spread", "pipelined", 8), rat("spread", "pipelined", 32),
		rat("hot", "hot", 32), tp("replay", 32), cost, apiK, pgK, hp)
}
