package load

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Run runs one scenario and returns what it observed.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg, err := withDefaults(cfg)
	if err != nil {
		return nil, err
	}
	res := &Result{Scenario: cfg.Scenario, Mode: "closed", Concurrency: cfg.Concurrency, Rate: cfg.Rate,
		ByStatus: map[string]int{}}
	if cfg.Rate > 0 {
		res.Mode = "open"
		res.Concurrency = cfg.MaxInFlight
	}
	var tallies []*tally
	switch {
	case cfg.Scenario == "storm":
		tallies, err = runStorm(ctx, cfg)
	case cfg.Rate > 0:
		tallies, err = runOpen(ctx, cfg)
	default:
		tallies, err = runClosed(ctx, cfg)
	}
	if err != nil {
		return nil, err
	}
	res.merge(tallies)
	res.Seconds = cfg.Duration.Seconds()
	if cfg.Count > 0 {
		res.Seconds = 0
	}
	res.Latency = PercentilesOf(res.hist)
	if cfg.Scenario == "mixed" {
		res.PlaceLatency = PercentilesOf(res.place)
		res.ReadLatency = PercentilesOf(res.read)
	}
	return res, nil
}

// withDefaults checks cfg and fills in its defaults.
func withDefaults(cfg Config) (Config, error) {
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = 64
	}
	if cfg.Concurrency < 1 {
		cfg.Concurrency = 1
	}
	if len(cfg.Customers) == 0 || len(cfg.Products) < 3 || len(cfg.Hot) < 2 {
		return cfg, fmt.Errorf("need customers, at least 3 products and 2 hot products")
	}
	if !slices.Contains(Scenarios, cfg.Scenario) && !slices.Contains(Probes, cfg.Scenario) {
		return cfg, fmt.Errorf("unknown scenario %q (want one of %v or %v)", cfg.Scenario, Scenarios, Probes)
	}
	if cfg.Scenario == "storm" && cfg.Rate > 0 {
		return cfg, fmt.Errorf("storm runs closed loop only")
	}
	if cfg.RunID == "" {
		cfg.RunID = strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	return cfg, nil
}

// merge adds the workers' tallies into res.
func (res *Result) merge(tallies []*tally) {
	res.hist, res.place, res.read = newHist(), newHist(), newHist()
	for _, t := range tallies {
		res.Requests += t.requests
		res.Orders += t.orders
		res.Replays += t.replays
		res.Reads += t.reads
		res.Unexpected += t.bad
		res.Transport += t.transport
		res.FreshOrdersTotal += t.freshTotal
		res.UncertainKeys += t.uncertain
		for s, n := range t.status {
			res.ByStatus[strconv.Itoa(s)] += n
		}
		for _, e := range t.examples {
			if len(res.Examples) < 5 {
				res.Examples = append(res.Examples, e)
			}
		}
		res.hist.Merge(t.hist)
		res.place.Merge(t.place)
		res.read.Merge(t.read)
	}
}

// window is the measured interval of a run, shared by its workers.
type window struct {
	start, end time.Time
	open       func(bool)
	once       [2]sync.Once
}

func (w *window) tick(now time.Time) (measured, done bool) {
	if now.Before(w.start) {
		return false, false
	}
	w.once[0].Do(func() {
		if w.open != nil {
			w.open(true)
		}
	})
	if !now.Before(w.end) {
		return false, true
	}
	return true, false
}

func (w *window) close() {
	w.once[0].Do(func() {
		if w.open != nil {
			w.open(true)
		}
	})
	w.once[1].Do(func() {
		if w.open != nil {
			w.open(false)
		}
	})
}

func runClosed(ctx context.Context, cfg Config) ([]*tally, error) {
	workers := make([]*worker, cfg.Concurrency)
	for i := range workers {
		workers[i] = newWorker(cfg, i, cfg.Customers[i%len(cfg.Customers)])
		defer workers[i].conn.Close()
	}
	if err := prepare(ctx, workers); err != nil {
		return nil, err
	}
	now := time.Now()
	win := &window{start: now.Add(cfg.Warmup), end: now.Add(cfg.Warmup + cfg.Duration), open: cfg.OnMeasure}
	if cfg.Count > 0 {
		win.start, win.end = now, now.Add(24*time.Hour)
	}
	var wg sync.WaitGroup
	var stopped atomic.Int32
	var sent atomic.Int64
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if cfg.Count > 0 && sent.Add(1) > int64(cfg.Count) {
					break
				}
				start := time.Now()
				measured, done := win.tick(start)
				if done {
					break
				}
				o := w.next()
				w.t.add(o, time.Since(start), measured)
			}
			if stopped.Add(1) == 1 {
				win.close()
			}
		}()
	}
	wg.Wait()
	win.close()
	return tallies(workers), ctx.Err()
}

func runOpen(ctx context.Context, cfg Config) ([]*tally, error) {
	workers := make([]*worker, cfg.MaxInFlight)
	for i := range workers {
		workers[i] = newWorker(cfg, i, cfg.Customers[i%len(cfg.Customers)])
		defer workers[i].conn.Close()
	}
	if err := prepare(ctx, workers); err != nil {
		return nil, err
	}
	interval := time.Duration(float64(time.Second) / cfg.Rate)
	t0 := time.Now().Add(10 * time.Millisecond)
	win := &window{start: t0.Add(cfg.Warmup), end: t0.Add(cfg.Warmup + cfg.Duration), open: cfg.OnMeasure}
	var seq atomic.Int64
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				due := t0.Add(time.Duration(seq.Add(1)-1) * interval)
				measured, done := win.tick(due)
				if done {
					return
				}
				if d := time.Until(due); d > 0 {
					time.Sleep(d)
				}
				o := w.next()
				w.t.add(o, time.Since(due), measured)
			}
		}()
	}
	wg.Wait()
	win.close()
	return tallies(workers), ctx.Err()
}

func tallies(ws []*worker) []*tally {
	out := make([]*tally, len(ws))
	for i, w := range ws {
		out[i] = w.t
	}
	return out
}

// prepare runs each worker's unmeasured set-up (replay and mixed place
// orders first) concurrently.
func prepare(ctx context.Context, ws []*worker) error {
	var wg sync.WaitGroup
	errs := make([]error, len(ws))
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.prepare(ctx)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
