package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/ordersvc/ordersvc/bench/internal/load"
)

// variant is one service binary under test, with the environment it
// adds to the service's.
type variant struct {
	label, bin string
	env        []string
	res        *Results
}

type env struct {
	o         options
	variants  []*variant
	cur       *variant
	res       *Results
	conn      *pgx.Conn
	postmastr int
	customers []load.Actor
	products  []string
	hot       []string
	api       *apiProc
	apiMode   string
	apiOf     *variant
	seq       int
	// steady-state scenarios
	rcv           *receiver
	steadyEnv     []string
	historyActors []load.Actor
	// measureHook, when set, sees each service run's measured window open
	// and close.
	measureHook func(open bool)
}

// use makes v the variant under test.
func (e *env) use(v *variant) {
	e.cur, e.res = v, v.res
}

func (e *env) loadActors() error {
	b, err := os.ReadFile(e.o.customers)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var a load.Actor
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			return fmt.Errorf("customers file: %w", err)
		}
		e.customers = append(e.customers, a)
	}
	if e.o.historyCustomers != "" {
		b, err := os.ReadFile(e.o.historyCustomers)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var a load.Actor
			if err := json.Unmarshal([]byte(line), &a); err != nil {
				return fmt.Errorf("history customers file: %w", err)
			}
			e.historyActors = append(e.historyActors, a)
		}
	}
	if len(e.customers) == 0 {
		return errors.New("no customers")
	}
	for n := 1; n <= load.NProducts; n++ {
		e.products = append(e.products, load.ProductID(n))
	}
	e.hot = []string{load.ProductID(load.HotBase + 1), load.ProductID(load.HotBase + 2)}
	return nil
}

func (e *env) prepareData(ctx context.Context) error {
	var seeded bool
	if err := e.conn.QueryRow(ctx, `SELECT to_regclass('bench_initial_stock') IS NOT NULL`).Scan(&seeded); err != nil {
		return err
	}
	if !seeded {
		if !e.o.seed {
			return errors.New("database not seeded")
		}
		log.Printf("seeding %d products", load.NProducts)
		if err := load.Seed(ctx, e.conn); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
	}
	return nil
}

// ensureAPI runs the service in mode "keys" or "nokeys", through addr
// (empty: straight to the database).
func (e *env) ensureAPI(ctx context.Context, mode, dbURL string) error {
	if e.api != nil && e.apiMode == mode && e.apiOf == e.cur {
		return nil
	}
	e.stopAPI()
	env := []string{}
	if strings.HasPrefix(mode, "steady-") {
		env = append(env, e.steadyEnv...)
	} else if mode != "dispatch" {
		// The outbox dispatcher works beside the placements, one statement
		// per event; held back, the runs compare the placement path with
		// pgbench's. The dispatch scenario runs it at its defaults.
		env = append(env, "OUTBOX_POLL_INTERVAL=1h")
	} else {
		// Marked delivered in the log: the dispatcher's database work
		// without a receiver (an unset URL runs no dispatcher at all).
		env = append(env, "OUTBOX_WEBHOOK_URL=log")
	}
	env = append(env, e.o.apiEnv...)
	env = append(env, e.cur.env...)
	if strings.HasPrefix(mode, "nokeys") {
		env = append(env, "BENCH_DISABLE_IDEMPOTENCY=1")
	}
	if e.o.pprofDir != "" {
		env = append(env, "PPROF_ADDR=127.0.0.1:0")
		if addr, err := freePort(); err == nil {
			env[len(env)-1] = "PPROF_ADDR=" + addr
		}
	}
	if dbURL == "" {
		dbURL = e.o.dbURL
	}
	p, err := startAPI(ctx, e.cur.bin, dbURL, filepath.Join(e.o.raw, "api-"+e.cur.label+".log"), env)
	if err != nil {
		return err
	}
	e.api, e.apiMode, e.apiOf = p, mode, e.cur
	log.Printf("api %s %s on %s (pid %d)", e.cur.label, mode, p.addr, p.pid())
	return nil
}

func (e *env) stopAPI() {
	if e.api != nil {
		e.api.stop()
		e.api = nil
	}
}

func (e *env) loadConfig(scenario string, c int, rate float64) load.Config {
	e.seq++
	addr := ""
	if e.api != nil {
		addr = e.api.addr
	}
	return load.Config{
		Addr: addr, Scenario: scenario, Concurrency: c, Rate: rate,
		Warmup: e.o.warmup, Duration: e.o.duration, Customers: e.customers,
		Products: e.products, Hot: e.hot,
		RunID: fmt.Sprintf("%s-%d-%d", e.cur.label, time.Now().Unix(), e.seq), Seed: uint64(e.seq),
	}
}
