package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ordersvc/ordersvc/bench/internal/load"
)

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
