package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// run measures the whole matrix: the counting phase, then every scenario at
// every concurrency for every variant, then writes each variant's report.
func run(ctx context.Context, o options) error {
	e, err := newEnv(ctx, o)
	if err != nil {
		return err
	}
	defer e.conn.Close(context.Background())
	defer e.stopAPI()
	if o.compare != "" {
		return e.compare(ctx)
	}
	if slices.ContainsFunc(o.scenarios, func(s string) bool { return !isSteady(s) }) {
		// Only the throughput scenarios compare with pgbench: a steady-state
		// run skips the counting phase. "work" runs it alone (pgss.go).
		for _, v := range e.variants {
			e.use(v)
			if err := e.count(ctx); err != nil {
				return fmt.Errorf("counting %s: %w", v.label, err)
			}
			if err := e.statWork(ctx); err != nil {
				return fmt.Errorf("pg_stat_statements %s: %w", v.label, err)
			}
		}
	}
	defer func() {
		if e.rcv != nil {
			_ = e.rcv.srv.Close()
		}
	}()
	for _, s := range o.scenarios {
		if s == "work" {
			continue
		}
		if err := e.scenario(ctx, s); err != nil {
			return err
		}
	}
	e.stopAPI()
	return e.finish()
}

// newEnv checks the options, connects to the database, reads the actors,
// seeds the data when needed and describes the machine.
func newEnv(ctx context.Context, o options) (*env, error) {
	if o.apis == "" && o.api == "" {
		return nil, errors.New("need -api or -apis")
	}
	if o.dbURL == "" || o.pgData == "" || o.pgLog == "" || o.customers == "" {
		return nil, errors.New("need -api, -db, -pgdata, -pglog and -customers (bench/run.sh passes them)")
	}
	for _, d := range []string{o.raw, filepath.Join(o.out, "history")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	e := &env{o: o}
	if err := e.parseVariants(); err != nil {
		return nil, err
	}
	var err error
	if e.postmastr, err = postmasterPID(o.pgData); err != nil {
		return nil, fmt.Errorf("postmaster pid: %w", err)
	}
	if e.conn, err = pgx.Connect(ctx, o.dbURL); err != nil {
		return nil, err
	}
	if err := e.loadActors(); err != nil {
		e.conn.Close(context.Background())
		return nil, err
	}
	if err := e.prepareData(ctx); err != nil {
		e.conn.Close(context.Background())
		return nil, err
	}
	m := machine(ctx, e.conn, o.commit)
	settings := Settings{Duration: o.duration.String(), Warmup: o.warmup.String(), APIEnv: o.apiEnv, PGSettings: pgSettings(ctx, e.conn)}
	for _, v := range e.variants {
		v.res.Machine, v.res.Settings = m, settings
		if o.apis != "" {
			v.res.Machine.Commit = v.label
		}
	}
	return e, nil
}

// parseVariants reads -apis (or -api and -label) into the service
// binaries under test, and makes the first one current.
func (e *env) parseVariants() error {
	started := time.Now().UTC()
	if e.o.apis == "" {
		e.variants = []*variant{{label: e.o.label, bin: e.o.api}}
	} else {
		for _, kv := range strings.Split(e.o.apis, ",") {
			label, bin, ok := strings.Cut(kv, "=")
			if !ok {
				return fmt.Errorf("bad -apis entry %q", kv)
			}
			e.variants = append(e.variants, &variant{label: label, bin: bin})
		}
	}
	for _, v := range e.variants {
		v.res = &Results{Label: v.label, Started: started}
	}
	e.use(e.variants[0])
	return nil
}

// ceilingScripts are the pgbench scripts a throughput scenario runs after
// the service's runs at each concurrency (bench/pgbench). The spread
// placement has two references: the per-statement script and the pipelined
// one (one round trip per order).
var ceilingScripts = map[string][]string{
	"spread": {"placement", "pipelined"},
	"hot":    {"hot"},
	"nokeys": {"nokeys"},
}

// scenario runs one scenario: a steady-state one for every variant, a
// throughput one at every concurrency, every variant back to back and then
// its pgbench references.
func (e *env) scenario(ctx context.Context, s string) error {
	if isSteady(s) {
		for _, v := range e.variants {
			e.use(v)
			if err := e.steady(ctx, s); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
		return nil
	}
	concurrency := e.o.concurrency
	if s == "dispatch" {
		concurrency = concurrency[len(concurrency)-1:] // the top one only
	}
	for _, c := range concurrency {
		for _, v := range e.variants {
			e.use(v)
			if err := e.serviceRun(ctx, s, c, 0); err != nil {
				return err
			}
		}
		if e.o.noPgbench {
			continue
		}
		for _, script := range ceilingScripts[s] {
			if err := e.pgbenchRun(ctx, script, c, 0); err != nil {
				return err
			}
		}
	}
	if s == "spread" && !e.o.noPgbench && len(e.variants) == 1 {
		return e.halfPeak(ctx)
	}
	return nil
}

// finish marks each variant's result FAILED when a run failed and writes
// its report.
func (e *env) finish() error {
	failed := false
	for _, v := range e.variants {
		e.use(v)
		e.res.Finished = time.Now().UTC()
		for _, r := range e.res.Runs {
			e.res.Failed = e.res.Failed || r.Failed
		}
		if e.res.HalfPeak != nil {
			e.res.Failed = e.res.Failed || e.res.HalfPeak.Service.Failed || e.res.HalfPeak.Pgbench.Failed
		}
		if err := e.write(); err != nil {
			return err
		}
		failed = failed || e.res.Failed
	}
	if failed {
		return errors.New("FAILED: a run broke an invariant or got unexpected responses; see REPORT.md")
	}
	return nil
}
