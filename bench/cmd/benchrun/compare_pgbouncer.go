package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/url"
	"path/filepath"
	"time"

	"github.com/ordersvc/ordersvc/bench/internal/load"
)

// PoolerComparison is one -compare pgbouncer run: the same scenario and
// concurrency against a baseline deployment and an alternative one,
// alternating, in one session.
type PoolerComparison struct {
	Name        string    `json:"name"` // pgbouncer
	Label       string    `json:"label"`
	Started     time.Time `json:"started"`
	Finished    time.Time `json:"finished"`
	Machine     Machine   `json:"machine"`
	Settings    Settings  `json:"settings"`
	Scenario    string    `json:"scenario"`
	Concurrency int       `json:"concurrency"`
	Baseline    string    `json:"baseline"`    // what the baseline is
	Alternative string    `json:"alternative"` // what it is compared with
	Pooler      string    `json:"pooler,omitempty"`
	Rounds      []Round   `json:"rounds"`
	Failed      bool      `json:"failed"`
}

// Round is one baseline run followed by one alternative run.
type Round struct {
	Baseline    Run     `json:"baseline"`
	Alternative Run     `json:"alternative"`
	PoolerCPU   float64 `json:"pooler_cpu_seconds"` // PgBouncer, during the alternative run
}

// comparePgBouncer measures placements (the spread scenario) at the top
// concurrency against one replica connected straight to PostgreSQL, then
// against two replicas sharing a PgBouncer in transaction mode (Debian's,
// default settings otherwise), the load generator spreading its connections
// over both as a round-robin balancer would; -compare-rounds times, so that
// drift on a shared machine hits both sides alike.
func (e *env) comparePgBouncer(ctx context.Context) error {
	if e.o.apis != "" {
		return errors.New("-compare pgbouncer measures one service binary: give -api, not -apis")
	}
	c := e.o.concurrency[len(e.o.concurrency)-1]
	bouncer, err := startBouncer(e.o.pgbouncerBin, e.o.dbURL, e.o.raw)
	if err != nil {
		return err
	}
	defer bouncer.stop()
	log.Printf("pgbouncer %s (pid %d) in front of the benchmark server", bouncer.addr, bouncer.cmd.Process.Pid)

	via, err := url.Parse(e.o.dbURL)
	if err != nil {
		return err
	}
	via.Host = bouncer.addr
	q := via.Query()
	q.Set("default_query_exec_mode", "cache_describe")
	via.RawQuery = q.Encode()

	cmp := &PoolerComparison{
		Name: "pgbouncer", Label: e.res.Label, Started: e.res.Started, Machine: e.res.Machine, Settings: e.res.Settings,
		Scenario: "spread", Concurrency: c,
		Baseline:    "1 replica, straight to PostgreSQL (default exec mode cache_statement)",
		Alternative: "2 replicas, round robin by connection, through PgBouncer (pool_mode = transaction, default_query_exec_mode=cache_describe)",
		Pooler:      bouncer.version,
	}
	env := append([]string{"OUTBOX_POLL_INTERVAL=1h"}, e.o.apiEnv...)
	for i := 0; i < e.o.compareRounds; i++ {
		var round Round
		if round.Baseline, _, err = e.replicasRun(ctx, 1, e.o.dbURL, env, c, nil); err != nil {
			return fmt.Errorf("direct run: %w", err)
		}
		if round.Alternative, round.PoolerCPU, err = e.replicasRun(ctx, 2, via.String(), env, c, bouncer); err != nil {
			return fmt.Errorf("pgbouncer run: %w", err)
		}
		log.Printf("round %d: direct %.0f/s p99 %.1f ms; pgbouncer + 2 replicas %.0f/s p99 %.1f ms (ratio %.2f)",
			i+1, round.Baseline.Throughput, round.Baseline.Latency.P99,
			round.Alternative.Throughput, round.Alternative.Latency.P99,
			round.Alternative.Throughput/round.Baseline.Throughput)
		cmp.Failed = cmp.Failed || round.Baseline.Failed || round.Alternative.Failed
		cmp.Rounds = append(cmp.Rounds, round)
	}
	cmp.Finished = time.Now().UTC()
	if err := writePoolerComparison(e.o.out, cmp); err != nil {
		return err
	}
	if cmp.Failed {
		return errors.New("FAILED: a run broke an invariant or got unexpected responses; see REPORT.md")
	}
	return nil
}

// replicasRun starts n replicas of the service on dbURL, runs the spread
// scenario at concurrency c over all of them, checks the invariants, and
// stops them. With a bouncer, it also returns PgBouncer's CPU seconds in the
// measured window.
func (e *env) replicasRun(ctx context.Context, n int, dbURL string, env []string, c int, b *bouncerProc) (Run, float64, error) {
	var procs []*apiProc
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	var addrs []string
	for i := 0; i < n; i++ {
		p, err := startAPI(ctx, e.cur.bin, dbURL, filepath.Join(e.o.raw, fmt.Sprintf("api-compare-%d.log", i+1)), env)
		if err != nil {
			return Run{}, 0, err
		}
		procs = append(procs, p)
		addrs = append(addrs, p.addr)
	}
	if err := load.Reset(ctx, e.conn); err != nil {
		return Run{}, 0, err
	}
	e.waitQuiet(ctx)
	cfg := e.loadConfig("spread", c, 0)
	cfg.Addr, cfg.Addrs = "", addrs
	apis := func() float64 {
		t := 0.0
		for _, p := range procs {
			t += apiCPU(p.pid())
		}
		return t
	}
	pooler := func() float64 {
		if b == nil {
			return 0
		}
		self, _, _, _ := procTimes(b.cmd.Process.Pid)
		return self
	}
	var before, after snapshot
	var poolBefore, poolAfter float64
	cfg.OnMeasure = func(open bool) {
		s := e.snap()
		s.api = apis()
		if open {
			before, poolBefore = s, pooler()
		} else {
			after, poolAfter = s, pooler()
		}
	}
	r, err := load.Run(ctx, cfg)
	if err != nil {
		return Run{}, 0, err
	}
	inv, err := load.Check(ctx, e.conn, true, r.FreshOrdersTotal, r.UncertainKeys)
	if err != nil {
		return Run{}, 0, err
	}
	pool := poolAfter - poolBefore
	run := Run{
		Kind: "service", Scenario: fmt.Sprintf("spread, %d replica(s)", n), Mode: r.Mode, Concurrency: r.Concurrency,
		Seconds: r.Seconds, Throughput: r.Throughput(), Requests: r.Requests, Orders: r.Orders,
		ByStatus: r.ByStatus, Unexpected: r.Unexpected, Examples: r.Examples, Latency: r.Latency,
		CPU: CPU{API: after.api - before.api, Postgres: after.pg - before.pg, Client: after.client - before.client,
			Other: max(0, (after.machine-before.machine)-(after.api-before.api)-(after.pg-before.pg)-(after.client-before.client)-pool)},
		Invariants: &inv,
	}
	judge(&run)
	log.Printf("%-30s c=%-10d %8.0f/s  p50 %6.2f  p99 %7.2f ms  cpu api %.1fs pg %.1fs pgbouncer %.1fs client %.1fs other %.1fs  [%s]",
		run.Scenario, c, run.Throughput, run.Latency.P50, run.Latency.P99, run.CPU.API, run.CPU.Postgres, pool, run.CPU.Client, run.CPU.Other, statusLine(run.ByStatus))
	return run, pool, nil
}
