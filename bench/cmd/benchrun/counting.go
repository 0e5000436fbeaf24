package main

import (
	"context"
	"fmt"
	"log"
	"net/url"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/ordersvc/ordersvc/bench/internal/load"
)

// count measures, through the statement log and a counting proxy, what one
// placement, one replay and one transaction of each pgbench placement script
// send to PostgreSQL.
func (e *env) count(ctx context.Context) error {
	u, err := url.Parse(e.o.dbURL)
	if err != nil {
		return err
	}
	proxy, err := newRTProxy(u.Host)
	if err != nil {
		return err
	}
	defer proxy.close()
	viaProxy := *u
	viaProxy.Host = proxy.addr()
	if err := load.Reset(ctx, e.conn); err != nil {
		return err
	}
	if err := e.ensureAPI(ctx, "keys-counting", viaProxy.String()); err != nil {
		return err
	}
	defer e.stopAPI()
	warm := e.loadConfig("spread", 1, 0)
	warm.Count = 50
	if _, err := load.Run(ctx, warm); err != nil {
		return err
	}
	if err := setLogStatement(ctx, e.conn, "all"); err != nil {
		return err
	}
	defer func() { _ = setLogStatement(context.Background(), e.conn, "none") }()
	c := &e.res.Counting
	if c.Placement, err = e.countService(ctx, proxy, "spread"); err != nil {
		return err
	}
	if c.Replay, err = e.countService(ctx, proxy, "replay"); err != nil {
		return err
	}
	if c.Pgbench, err = e.countPgbench(ctx, proxy, viaProxy.String(), "placement"); err != nil {
		return err
	}
	if c.Pipelined, err = e.countPgbench(ctx, proxy, viaProxy.String(), "pipelined"); err != nil {
		return err
	}
	log.Printf("per placement: service %.2f statements / %.2f round trips; replay %.2f / %.2f; pgbench %.2f / %.2f; pipelined %.2f / %.2f",
		c.Placement.Statements, c.Placement.RoundTrips, c.Replay.Statements, c.Replay.RoundTrips,
		c.Pgbench.Statements, c.Pgbench.RoundTrips, c.Pipelined.Statements, c.Pipelined.RoundTrips)
	return nil
}

// countService counts the statements and round trips of -count requests
// of scenario at concurrency 1.
func (e *env) countService(ctx context.Context, proxy *rtProxy, scenario string) (*Exchange, error) {
	cfg := e.loadConfig(scenario, 1, 0)
	cfg.Count = e.o.count
	var mark, turns int64
	cfg.OnMeasure = func(open bool) {
		if open {
			time.Sleep(100 * time.Millisecond) // let the log catch up with the preparation
			mark, turns = logMark(e.o.pgLog), proxy.turns.Load()
		} else {
			turns = proxy.turns.Load() - turns
		}
	}
	r, err := load.Run(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if r.Unexpected > 0 {
		return nil, fmt.Errorf("%s counting run got unexpected responses: %v", scenario, r.Examples)
	}
	time.Sleep(300 * time.Millisecond)
	st, err := statements(e.o.pgLog, mark, "ordersvc")
	if err != nil {
		return nil, err
	}
	return exchange(st, e.o.count, turns), nil
}

// countPgbench runs -count transactions of a pgbench script through the
// proxy: its turns include connecting and preparing the statements once.
func (e *env) countPgbench(ctx context.Context, proxy *rtProxy, dbURL, script string) (*Exchange, error) {
	mark, turns := logMark(e.o.pgLog), proxy.turns.Load()
	out, err := runPgbenchCount(ctx, e.o.pgbench, dbURL, filepath.Join(e.o.scripts, scriptFile(script)), e.o.count)
	if err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", script, err, out)
	}
	turns = proxy.turns.Load() - turns
	time.Sleep(300 * time.Millisecond)
	st, err := statements(e.o.pgLog, mark, "pgbench")
	if err != nil {
		return nil, err
	}
	return exchange(st, e.o.count, turns), nil
}

func exchange(st []string, n int, turns int64) *Exchange {
	x := &Exchange{Requests: n, Statements: float64(len(st)) / float64(n), RoundTrips: float64(turns) / float64(n)}
	per := len(st) / n
	if per > 0 && len(st) >= 2*per {
		x.Sequence = st[per : 2*per] // the second request: the first may prepare
	} else {
		x.Sequence = st
	}
	return x
}

func runPgbenchCount(ctx context.Context, bin, dbURL, script string, n int) (string, error) {
	out, err := execOutput(ctx, bin, "-n", "-M", "prepared", "-c", "1", "-t", strconv.Itoa(n), "-f", script, dbURL)
	return out, err
}

func setLogStatement(ctx context.Context, conn *pgx.Conn, v string) error {
	if _, err := conn.Exec(ctx, `ALTER SYSTEM SET log_statement = '`+v+`'`); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
		return err
	}
	time.Sleep(300 * time.Millisecond)
	return nil
}
