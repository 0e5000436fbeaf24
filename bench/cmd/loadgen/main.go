// Command loadgen runs one scenario against a running service and prints
// what it observed as JSON; with -db it also checks the invariants after
// the run and exits non-zero when one broke. bench/run.sh drives the whole
// matrix through cmd/benchrun instead; loadgen is for one-off runs:
//
//	loadgen -addr 127.0.0.1:8080 -customers customers.jsonl -scenario spread -c 8 -d 10s
//	loadgen ... -scenario spread -rate 500 -d 30s     # open loop
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ordersvc/ordersvc/bench/internal/load"
)

func main() {
	var cfg load.Config
	var customers, db string
	var reset bool
	flag.StringVar(&cfg.Addr, "addr", "127.0.0.1:8080", "service address (host:port); keep it on 127.0.0.1")
	flag.StringVar(&customers, "customers", "", "file of `api actor create` outputs (customers), one JSON object a line")
	flag.StringVar(&cfg.Scenario, "scenario", "spread", "one of "+strings.Join(load.Scenarios, ", "))
	flag.IntVar(&cfg.Concurrency, "c", 8, "closed loop: workers (storm: keys in flight, 8 clients each)")
	flag.Float64Var(&cfg.Rate, "rate", 0, "open loop: requests per second (0: closed loop)")
	flag.IntVar(&cfg.MaxInFlight, "max-inflight", 64, "open loop: connections")
	flag.DurationVar(&cfg.Duration, "d", 10*time.Second, "measured duration")
	flag.DurationVar(&cfg.Warmup, "warmup", 2*time.Second, "warm-up before measuring")
	flag.StringVar(&db, "db", "", "database to check the invariants in after the run (seeded by benchrun)")
	flag.BoolVar(&reset, "reset", false, "with -db: reset the data before the run")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, customers, db, reset); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg load.Config, customers, db string, reset bool) error {
	b, err := os.ReadFile(customers)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var a load.Actor
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			return err
		}
		cfg.Customers = append(cfg.Customers, a)
	}
	for n := 1; n <= load.NProducts; n++ {
		cfg.Products = append(cfg.Products, load.ProductID(n))
	}
	cfg.Hot = []string{load.ProductID(load.HotBase + 1), load.ProductID(load.HotBase + 2)}
	var conn *pgx.Conn
	if db != "" {
		if conn, err = pgx.Connect(ctx, db); err != nil {
			return err
		}
		defer conn.Close(context.Background())
		if reset {
			if err := load.Reset(ctx, conn); err != nil {
				return err
			}
		}
	}
	r, err := load.Run(ctx, cfg)
	if err != nil {
		return err
	}
	out := map[string]any{"result": r, "throughput": r.Throughput()}
	failed := r.Unexpected > 0
	if conn != nil {
		inv, err := load.Check(ctx, conn, cfg.Scenario != "nokeys", r.FreshOrdersTotal, r.UncertainKeys)
		if err != nil {
			return err
		}
		out["invariants"] = inv
		failed = failed || !inv.OK()
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(out)
	if failed {
		return fmt.Errorf("FAILED")
	}
	return nil
}
