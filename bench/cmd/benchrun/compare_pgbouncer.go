package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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

// bouncerProc is a PgBouncer the benchmark started.
type bouncerProc struct {
	cmd     *exec.Cmd
	addr    string
	dir     string
	version string
}

// startBouncer starts Debian's pgbouncer in transaction mode, PgBouncer's
// defaults otherwise, in front of the server of dbURL (trust, as the
// benchmark server is). PgBouncer refuses to run as root; as root it runs as
// the postgres user, as the test kit does (internal/testkit/pgbouncer.go).
func startBouncer(bin, dbURL, raw string) (*bouncerProc, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%w (Debian: apt-get install pgbouncer; or -pgbouncer-bin)", err)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		return nil, err
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	dir, err := os.MkdirTemp("", "ordersvc-bench-pgbouncer-")
	if err != nil {
		return nil, err
	}
	conf := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %s
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
logfile = %s
`, u.Hostname(), u.Port(), port, filepath.Join(dir, "userlist.txt"), filepath.Join(raw, "pgbouncer.log"))
	files := map[string]string{"pgbouncer.ini": conf, "userlist.txt": fmt.Sprintf("%q \"\"\n", u.User.Username())}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() == 0 {
		pg, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("run pgbouncer as postgres: %w", err)
		}
		uid, _ := strconv.Atoi(pg.Uid)
		gid, _ := strconv.Atoi(pg.Gid)
		for _, p := range []string{dir, filepath.Join(raw, "pgbouncer.log")} {
			if f, err := os.OpenFile(p, os.O_CREATE|os.O_RDONLY, 0o644); err == nil {
				f.Close()
			}
			if err := os.Chown(p, uid, gid); err != nil {
				return nil, err
			}
		}
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	version, _ := exec.Command(bin, "--version").Output()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start pgbouncer: %w", err)
	}
	b := &bouncerProc{cmd: cmd, addr: addr, dir: dir, version: firstLine(string(version))}
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return b, nil
		}
		if time.Now().After(deadline) {
			b.stop()
			return nil, fmt.Errorf("pgbouncer did not listen on %s; see %s", addr, filepath.Join(raw, "pgbouncer.log"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (b *bouncerProc) stop() {
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = b.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = b.cmd.Process.Kill()
		<-done
	}
	_ = os.RemoveAll(b.dir)
}

func firstLine(s string) string {
	for i, r := range s {
		if r == '\n' {
			return s[:i]
		}
	}
	return s
}

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
