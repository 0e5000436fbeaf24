package main

import (
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

const (
	steadyBegin = "<!-- BEGIN GENERATED steady state by bench/run.sh: do not edit between these markers -->"
	steadyEnd   = "<!-- END GENERATED steady state -->"
)

// writeSteady stores the steady-state results, draws the soak, and
// rewrites the steady-state section of REPORT.md.
func (e *env) writeSteady() error {
	dir := filepath.Join(e.o.out, "steady")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(e.res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, e.res.Label+".json"), b, 0o644); err != nil {
		return err
	}
	if s := e.res.Steady.Soak; s != nil && len(s.Windows) > 0 {
		if err := plotSoak(s, filepath.Join(e.o.out, "soak.png")); err != nil {
			return fmt.Errorf("plot soak: %w", err)
		}
	}
	var rs []*Results
	for _, v := range e.variants {
		if v.res.Steady != nil {
			rs = append(rs, v.res)
		}
	}
	return writeSection(filepath.Join(e.o.out, "REPORT.md"), steadyBegin, steadyEnd, steadySection(rs))
}

func steadySection(rs []*Results) string {
	var b strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }
	if len(rs) == 0 {
		return ""
	}
	multi := len(rs) > 1
	var labels []string
	failed := false
	for _, r := range rs {
		labels = append(labels, r.Label)
		failed = failed || r.Failed
	}
	r0 := rs[0]
	status := "kept every invariant and got only expected responses"
	if failed {
		status = "**FAILED**: see the notes below"
	}
	p("\n## Steady state: `%s`\n\n", strings.Join(labels, "`, `"))
	p("Run %s (commit `%s`, %d cores shared by service, PostgreSQL and load generator); %s.\n",
		r0.Started.Format("2006-01-02 15:04 UTC"), r0.Machine.Commit, r0.Machine.NProc, status)
	if multi {
		p("Service binaries measured in rotation, each scenario running every binary back to back: %s.\n", strings.Join(labels, ", "))
	}
	p("Which scenarios truncate: **drain** and **lag** start from an empty outbox and no orders (TRUNCATE, as the throughput scenarios do, for comparable figures); **soak** and **history** never truncate: they run on whatever the earlier scenarios left.\n")
	for _, r := range rs {
		for _, n := range r.Steady.Notes {
			p("\n- %s: %s\n", r.Label, n)
		}
	}
	svc := func(r *Results) string {
		if multi {
			return "| " + r.Label + " "
		}
		return ""
	}
	svcHead, svcSep := "", ""
	if multi {
		svcHead, svcSep = "| service ", "| --- "
	}
	if slices.ContainsFunc(rs, func(r *Results) bool { return len(r.Steady.Drain) > 0 }) {
		p("\n### Outbox drain (nothing else running)\n\n")
		p("%s| backlog | receiver | OUTBOX_CONCURRENCY | delivered | seconds | events/s | bound (concurrency ÷ latency) |\n%s| ---: | --- | ---: | ---: | ---: | ---: | ---: |\n", svcHead, svcSep)
		for _, r := range rs {
			for _, d := range r.Steady.Drain {
				recv := "answers at once"
				bound := ""
				if d.ReceiverMillis > 0 {
					recv = fmt.Sprintf("%.0f ms per request", d.ReceiverMillis)
					bound = fmt.Sprintf("%.0f", d.Bound)
				}
				p("%s| %d | %s | %d | %d | %.1f | **%.0f** | %s |\n", svc(r), d.Events, recv, d.Concurrency, d.Delivered, d.Seconds, d.PerSecond, bound)
			}
		}
		p("\nA receiver that answers at once: every event of the backlog, timed from the first delivery to the last. A 50 ms receiver: the events delivered in the run length after the first one. Goal: ≥ 5,000 events/s from a 50k backlog.\n")
	}
	if slices.ContainsFunc(rs, func(r *Results) bool { return r.Steady.Lag != nil }) {
		p("\n### Outbox lag under the highest sustained placement rate\n\n")
		p("Spread placements, closed loop at the highest concurrency the benchmark runs, dispatcher on at its defaults with a local receiver answering at once; the oldest undelivered (pending or claimed) event's age read every second.\n\n")
		p("%s| concurrency | placements/s | p50 / p99 ms | oldest undelivered: max | p50 | at the end | events delivered by the end / placed |\n%s| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n", svcHead, svcSep)
		for _, r := range rs {
			if l := r.Steady.Lag; l != nil {
				p("%s| %d | %.0f | %.2f / %.2f | **%.2f s** | %.2f s | %.2f s | %d / %d |\n", svc(r), l.Concurrency, l.Throughput, l.Latency.P50, l.Latency.P99, l.MaxAge, l.P50Age, l.LastAge, l.Delivered, l.Placed)
			}
		}
		p("\nGoal: the oldest pending event stays under 2 s for the whole run.\n")
	}
	for _, r := range rs {
		b.WriteString(soakAndHistory(r, multi))
	}
	return b.String()
}

// soakAndHistory renders one service's soak and history.
func soakAndHistory(r *Results, multi bool) string {
	var b strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }
	st := r.Steady
	of := ""
	if multi {
		of = " (" + r.Label + ")"
	}
	if s := st.Soak; s != nil && len(s.Windows) > 0 {
		first, last := s.Windows[0], s.Windows[len(s.Windows)-1]
		p("\n### Soak%s: %.0f s at %.0f placements/s (%.0f%% of the %.0f/s peak), nothing truncated\n\n", of, s.Seconds, s.Rate, 100*s.Rate/s.Peak, s.Peak)
		p("Open-loop spread placements in back-to-back 10-second windows, dispatcher and receiver on, service env `%s` (the purge and the retention work during the run). %d orders in the database at the start.\n\n", strings.Join(s.Env, " "), s.StartOrders)
		p("![soak](soak.png)\n\n")
		p("| | first window | last window | last ÷ first | goal |\n| --- | ---: | ---: | ---: | --- |\n")
		p("| throughput (orders/s) | %.0f | %.0f | %s | ≥ 0.9 |\n", first.Throughput, last.Throughput, ratio(last.Throughput, first.Throughput))
		p("| p50 (ms) | %.2f | %.2f | %s | |\n", first.P50, last.P50, ratio(last.P50, first.P50))
		p("| p99 (ms) | %.2f | %.2f | %s | ≤ 1.5 |\n", first.P99, last.P99, ratio(last.P99, first.P99))
		maxAge := 0.0
		for _, w := range s.Windows {
			maxAge = math.Max(maxAge, w.MaxAge)
		}
		p("| oldest pending event (s) | %.2f | %.2f | | flat; max over the run **%.2f s** |\n", first.MaxAge, last.MaxAge, maxAge)
		p("| orders + lines (MiB) | %.1f | %.1f | | grows with orders |\n", mib(first.OrdersBytes), mib(last.OrdersBytes))
		p("| idempotency_keys (MiB) | %.1f | %.1f | | flat once the TTL is reached |\n", mib(first.KeysBytes), mib(last.KeysBytes))
		p("| outbox_events (MiB) | %.1f | %.1f | | flat once the retention is reached |\n", mib(first.OutboxBytes), mib(last.OutboxBytes))
		p("| cumulative orders | %d | %d | | |\n", first.Orders, last.Orders)
		if s.Invariants != nil {
			v := "held"
			if !s.Invariants.OK() {
				v = "**broken**: " + strings.Join(s.Invariants.Violations, "; ")
			}
			p("\nAfter the soak: stock conservation and no key in progress %s; %d unexpected responses; %d events pending, %d delivered and kept.\n", v, s.Unexpected, s.Invariants.OutboxPending, s.Invariants.OutboxDelivered)
		}
		p("\n<details><summary>Every window</summary>\n\n| t (s) | orders/s | p50 ms | p99 ms | oldest pending s | orders | orders MiB | keys MiB | outbox MiB |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, w := range s.Windows {
			p("| %.0f | %.0f | %.2f | %.2f | %.2f | %d | %.1f | %.1f | %.1f |\n", w.At, w.Throughput, w.P50, w.P99, w.MaxAge, w.Orders, mib(w.OrdersBytes), mib(w.KeysBytes), mib(w.OutboxBytes))
		}
		p("\n</details>\n")
	}
	if len(st.Sizes) > 0 {
		p("\n### Table sizes per million orders (end of the soak)%s\n\n", of)
		p("| table | size | MiB per million orders |\n| --- | ---: | ---: |\n")
		for _, t := range st.Sizes {
			p("| %s | %.1f MiB | %.0f |\n", t.Table, mib(t.Bytes), t.PerM)
		}
		p("\nThe keys and the outbox are bounded by the TTL and the retention, not by the orders: their per-million figure falls as orders accumulate.\n")
	}
	if h := st.History; h != nil {
		p("\n### History%s: one customer with %d orders against a fresh customer\n\n", of, h.Orders)
		p("The history is bulk-loaded in SQL (%.1f s): shipped, fully paid orders of one customer, the orders' rows only (what the credit check reads). Then spread placements at concurrency %d for the heavy customer and for a customer with no orders, alternated, %d rounds each, in the same run.\n\n", h.LoadSeconds, h.Concurrency, h.Rounds)
		p("| customer | placements/s | p50 ms |\n| --- | ---: | ---: |\n| fresh | %.0f | %.2f |\n| %d orders of history | %.0f | %.2f |\n\n", h.Fresh, h.FreshP50, h.Orders, h.Heavy, h.HeavyP50)
		p("Ratio heavy ÷ fresh: **%.2f** (goal ≥ 0.9).\n", h.Ratio)
	}
	return b.String()
}

// plotSoak draws the soak's windows over time: throughput, p50/p99,
// oldest pending age, table sizes, and cumulative orders, one panel each.
func plotSoak(s *Soak, path string) error {
	const W, panelH, left, right, top = 900, 150, 80, 170, 40
	type line struct {
		name string
		col  color.RGBA
		v    func(SoakWindow) float64
	}
	panels := []struct {
		title string
		lines []line
	}{
		{"throughput (orders/s)", []line{{"orders/s", color.RGBA{0x1f, 0x77, 0xb4, 255}, func(w SoakWindow) float64 { return w.Throughput }}}},
		{"latency (ms)", []line{{"p50", color.RGBA{0x2c, 0xa0, 0x2c, 255}, func(w SoakWindow) float64 { return w.P50 }},
			{"p99", color.RGBA{0xd6, 0x27, 0x28, 255}, func(w SoakWindow) float64 { return w.P99 }}}},
		{"oldest pending event (s)", []line{{"oldest pending", color.RGBA{0x94, 0x67, 0xbd, 255}, func(w SoakWindow) float64 { return w.MaxAge }}}},
		{"table size (MiB)", []line{{"orders+lines", color.RGBA{0x1f, 0x77, 0xb4, 255}, func(w SoakWindow) float64 { return mib(w.OrdersBytes) }},
			{"idempotency", color.RGBA{0xff, 0x7f, 0x0e, 255}, func(w SoakWindow) float64 { return mib(w.KeysBytes) }},
			{"outbox", color.RGBA{0x94, 0x67, 0xbd, 255}, func(w SoakWindow) float64 { return mib(w.OutboxBytes) }}}},
		{"cumulative orders", []line{{"orders", color.RGBA{0x55, 0x55, 0x55, 255}, func(w SoakWindow) float64 { return float64(w.Orders) }}}},
	}
	H := top + len(panels)*(panelH+30) + 30
	img := image.NewRGBA(image.Rect(0, 0, W, H))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	black, grey := color.RGBA{0, 0, 0, 255}, color.RGBA{0xdd, 0xdd, 0xdd, 255}
	text(img, left, 22, fmt.Sprintf("Soak: %.0f placements/s for %.0f s, nothing truncated (10 s windows)", s.Rate, s.Seconds), black)
	tMax := s.Windows[len(s.Windows)-1].At
	px := func(t float64) int { return left + int(t/tMax*float64(W-left-right)) }
	for i, pn := range panels {
		y0 := top + i*(panelH+30) + 20
		maxY := 0.0
		for _, l := range pn.lines {
			for _, w := range s.Windows {
				maxY = math.Max(maxY, l.v(w))
			}
		}
		if maxY == 0 {
			maxY = 1
		}
		step := niceStep(maxY / 3)
		maxY = math.Ceil(maxY/step) * step
		py := func(v float64) int { return y0 + panelH - int(v/maxY*float64(panelH)) }
		for v := 0.0; v <= maxY+1e-9; v += step {
			lineTo(img, left, py(v), W-right, py(v), grey)
			lbl := strconv.FormatFloat(v, 'f', -1, 64)
			text(img, left-8-7*len(lbl), py(v)+4, lbl, black)
		}
		lineTo(img, left, y0+panelH, W-right, y0+panelH, black)
		lineTo(img, left, y0, left, y0+panelH, black)
		text(img, left, y0-6, pn.title, black)
		for j, l := range pn.lines {
			for k := 1; k < len(s.Windows); k++ {
				a, b := s.Windows[k-1], s.Windows[k]
				thick(img, px(a.At), py(l.v(a)), px(b.At), py(l.v(b)), l.col, false)
			}
			thick(img, W-right+15, y0+12+18*j, W-right+40, y0+12+18*j, l.col, false)
			text(img, W-right+46, y0+16+18*j, l.name, black)
		}
	}
	text(img, (W-right)/2-40, H-10, fmt.Sprintf("seconds since the start (0 to %.0f)", tMax), black)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return png.Encode(f, img)
}

func lineTo(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) { line(img, x0, y0, x1, y1, c, false) }
