package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
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
	}
	return name + ".sql"
}
