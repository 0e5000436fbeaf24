package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/ordersvc/ordersvc/bench/internal/load"
)

// pgbenchRun is one pgbench invocation and what it reported.
type pgbenchRun struct {
	TPS       float64
	Processed int64
	Failed    int64
	Aborted   bool
	Latency   load.Percentiles
	ClientCPU float64
	Output    string
}

var (
	tpsRe       = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)
	processedRe = regexp.MustCompile(`number of transactions actually processed: (\d+)`)
	failedRe    = regexp.MustCompile(`number of failed transactions: (\d+)`)
)

// runPgbench runs script with clients connections for d (or at rate tps when
// rate > 0), logging every transaction's latency under prefix.
func runPgbench(ctx context.Context, bin, dbURL, script string, clients int, d time.Duration, rate float64, prefix string) (*pgbenchRun, error) {
	threads := min(clients, 4)
	args := []string{"-n", "-M", "prepared", "-c", strconv.Itoa(clients), "-j", strconv.Itoa(threads),
		"-T", strconv.Itoa(int(d.Seconds())), "-f", script, "-l", "--log-prefix=" + prefix}
	if rate > 0 {
		args = append(args, "-R", strconv.FormatFloat(rate, 'f', 0, 64))
	}
	args = append(args, dbURL)
	for _, old := range globLogs(prefix) {
		_ = os.Remove(old)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	r := &pgbenchRun{Output: out.String()}
	if cmd.ProcessState != nil {
		r.ClientCPU = cmd.ProcessState.UserTime().Seconds() + cmd.ProcessState.SystemTime().Seconds()
	}
	if m := tpsRe.FindStringSubmatch(r.Output); m != nil {
		r.TPS, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := processedRe.FindStringSubmatch(r.Output); m != nil {
		r.Processed, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m := failedRe.FindStringSubmatch(r.Output); m != nil {
		r.Failed, _ = strconv.ParseInt(m[1], 10, 64)
	}
	r.Aborted = strings.Contains(r.Output, "aborted")
	if err != nil && r.TPS == 0 {
		return r, fmt.Errorf("pgbench: %w\n%s", err, r.Output)
	}
	h, err := readPgbenchLogs(prefix)
	if err != nil {
		return r, err
	}
	r.Latency = load.PercentilesOf(h)
	return r, nil
}

func globLogs(prefix string) []string {
	m, _ := filepath.Glob(prefix + ".*")
	return m
}

// readPgbenchLogs reads pgbench's per-transaction logs ("client_id
// transaction_no time script_no time_epoch time_us [schedule_lag]"); time is
// the latency in µs, counted from the scheduled start under --rate.
func readPgbenchLogs(prefix string) (*hdrhistogram.Histogram, error) {
	h := hdrhistogram.New(1, 60_000_000, 3)
	for _, path := range globLogs(prefix) {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 6 {
				continue
			}
			us, err := strconv.ParseInt(fields[2], 10, 64)
			if err != nil {
				continue // "skipped" or "failed"
			}
			_ = h.RecordValue(max(us, 1))
		}
		f.Close()
	}
	return h, nil
}

// scriptFile names the pgbench script of a ceiling.
func scriptFile(name string) string {
	switch name {
	case "hot":
		return "placement_hot.sql"
	case "nokeys":
		return "placement_nokeys.sql"
	case "pipelined":
		return "placement_pipelined.sql"
	}
	return name + ".sql"
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

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
