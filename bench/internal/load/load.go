// Package load drives the service with one scenario at a fixed concurrency
// (closed loop: N workers, each sending its next request when the previous
// answered) or at a fixed rate (open loop: requests are due on a schedule
// and their latency counts from when they were due, so a stalled service
// cannot hide its queueing delay: no coordinated omission).
//
// Requests are serialized into a reused buffer per worker and sent on one
// keep-alive connection per worker; latencies go into HDR histograms.
package load

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/ordersvc/ordersvc/bench/internal/httpc"
)

// Actor is a caller of the service.
type Actor struct {
	ID    string `json:"actor_id"`
	Token string `json:"token"`
}

// Config describes one run.
type Config struct {
	Addr string // host:port of the service
	// Addrs, when set, are several replicas of the service: worker i keeps
	// its connection to Addrs[i mod len(Addrs)], the round robin of a load
	// balancer that spreads connections. Addr is then ignored.
	Addrs       []string
	Scenario    string
	Concurrency int     // closed loop: workers; storm: keys in flight (8 clients each)
	Rate        float64 // > 0: open loop at this many requests per second
	MaxInFlight int     // open loop: workers (connections); default 64
	Warmup      time.Duration
	Duration    time.Duration
	Timeout     time.Duration
	Customers   []Actor
	Products    []string // product ids for spread orders
	Hot         []string // the hot products (2)
	RunID       string   // prefix of the idempotency keys of this run
	// Count, when positive, ends a closed-loop run after that many requests
	// in all (no warm-up); for counting statements and round trips.
	Count int
	Seed  uint64
	// OnMeasure is called when the measured window opens (true) and closes
	// (false), for example to read CPU counters.
	OnMeasure func(open bool)
}

// Scenarios are the workloads a run may name.
// dispatch is spread with the service's outbox dispatcher running (the
// harness holds it back in the other scenarios).
var Scenarios = []string{"spread", "hot", "replay", "storm", "mixed", "nokeys", "dispatch"}

// Result is what a run observed.
type Result struct {
	Scenario    string         `json:"scenario"`
	Mode        string         `json:"mode"` // closed or open
	Concurrency int            `json:"concurrency"`
	Rate        float64        `json:"rate,omitempty"`
	Seconds     float64        `json:"seconds"` // measured window
	Requests    int64          `json:"requests"`
	Orders      int64          `json:"orders"`  // fresh placements in the window
	Replays     int64          `json:"replays"` // replayed responses in the window
	Reads       int64          `json:"reads"`
	ByStatus    map[string]int `json:"by_status"`
	Unexpected  int64          `json:"unexpected"` // responses the scenario did not expect
	Transport   int64          `json:"transport_errors"`
	Examples    []string       `json:"examples,omitempty"` // first few unexpected responses
	// FreshOrdersTotal counts every fresh placement of the run, preparation
	// and warm-up included: the orders table must hold exactly this many.
	FreshOrdersTotal int64 `json:"fresh_orders_total"`
	// UncertainKeys counts requests whose outcome is unknown (transport
	// errors on placements): each may or may not have placed an order.
	UncertainKeys int64 `json:"uncertain_keys"`

	Latency      Percentiles `json:"latency_ms"`
	PlaceLatency Percentiles `json:"place_latency_ms,omitempty"`
	ReadLatency  Percentiles `json:"read_latency_ms,omitempty"`

	hist, place, read *hdrhistogram.Histogram
}

// Percentiles of a latency distribution, in milliseconds.
type Percentiles struct {
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
	N    int64   `json:"n"`
}

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, 60_000_000, 3) } // µs

// PercentilesOf summarises a histogram of microseconds.
func PercentilesOf(h *hdrhistogram.Histogram) Percentiles {
	if h == nil || h.TotalCount() == 0 {
		return Percentiles{}
	}
	ms := func(v int64) float64 { return float64(v) / 1000 }
	return Percentiles{
		P50: ms(h.ValueAtQuantile(50)), P95: ms(h.ValueAtQuantile(95)), P99: ms(h.ValueAtQuantile(99)),
		P999: ms(h.ValueAtQuantile(99.9)), Max: ms(h.Max()), Mean: h.Mean() / 1000, N: h.TotalCount(),
	}
}

// Throughput is successful requests per second in the measured window; for
// placement scenarios it is orders per second (storm: keys per second).
func (r *Result) Throughput() float64 {
	if r.Seconds == 0 {
		return 0
	}
	switch r.Scenario {
	case "replay":
		return float64(r.Replays) / r.Seconds
	case "mixed":
		return float64(r.Orders+r.Reads) / r.Seconds
	}
	return float64(r.Orders) / r.Seconds
}

// kind of request, for latency bookkeeping.
type kind int

const (
	kPlace kind = iota
	kRead
)

// outcome of one request as a worker reports it.
type outcome struct {
	kind      kind
	status    int
	fresh     bool // a placement that created an order
	replay    bool
	read      bool
	bad       bool // not what the scenario expects
	transport bool
	example   string
}

// tally collects the outcomes of one worker; merged at the end.
type tally struct {
	requests, orders, replays, reads, bad, transport int64
	freshTotal, uncertain                            int64
	status                                           map[int]int
	hist, place, read                                *hdrhistogram.Histogram
	examples                                         []string
}

func newTally() *tally {
	return &tally{status: map[int]int{}, hist: newHist(), place: newHist(), read: newHist()}
}

func (t *tally) add(o outcome, lat time.Duration, measured bool) {
	if o.fresh {
		t.freshTotal++
	}
	if o.transport && o.kind == kPlace {
		t.uncertain++
	}
	if !measured {
		return
	}
	t.requests++
	if o.transport {
		t.transport++
	} else {
		t.status[o.status]++
	}
	if o.fresh {
		t.orders++
	}
	if o.replay {
		t.replays++
	}
	if o.read {
		t.reads++
	}
	if o.bad {
		t.bad++
		if len(t.examples) < 3 && o.example != "" {
			t.examples = append(t.examples, o.example)
		}
	}
	us := lat.Microseconds()
	if us < 1 {
		us = 1
	}
	_ = t.hist.RecordValue(us)
	if o.kind == kPlace {
		_ = t.place.RecordValue(us)
	} else {
		_ = t.read.RecordValue(us)
	}
}

// Run runs one scenario and returns what it observed.
func Run(ctx context.Context, cfg Config) (*Result, error) {
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
		return nil, fmt.Errorf("need customers, at least 3 products and 2 hot products")
	}
	known := false
	for _, s := range Scenarios {
		known = known || s == cfg.Scenario
	}
	if !known {
		return nil, fmt.Errorf("unknown scenario %q (want one of %v)", cfg.Scenario, Scenarios)
	}
	if cfg.Scenario == "storm" && cfg.Rate > 0 {
		return nil, fmt.Errorf("storm runs closed loop only")
	}
	if cfg.RunID == "" {
		cfg.RunID = strconv.FormatInt(time.Now().UnixNano(), 36)
	}

	res := &Result{Scenario: cfg.Scenario, Mode: "closed", Concurrency: cfg.Concurrency, Rate: cfg.Rate,
		ByStatus: map[string]int{}}
	if cfg.Rate > 0 {
		res.Mode = "open"
		res.Concurrency = cfg.MaxInFlight
	}

	var tallies []*tally
	var err error
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
	all, place, read := newHist(), newHist(), newHist()
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
		all.Merge(t.hist)
		place.Merge(t.place)
		read.Merge(t.read)
	}
	res.Seconds = cfg.Duration.Seconds()
	if cfg.Count > 0 {
		res.Seconds = 0
	}
	res.hist, res.place, res.read = all, place, read
	res.Latency = PercentilesOf(all)
	if cfg.Scenario == "mixed" {
		res.PlaceLatency = PercentilesOf(place)
		res.ReadLatency = PercentilesOf(read)
	}
	return res, nil
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

// worker sends one scenario's requests on one connection.
type worker struct {
	cfg      Config
	id       int
	customer Actor
	auth     string
	conn     *httpc.Conn
	rng      *rand.Rand
	t        *tally
	seq      int64
	buf      []byte
	body     []byte
	saved    [][]byte // replay: completed requests to send again
	orders   []string // mixed: ids of this worker's orders
	pick     []int
}

func newWorker(cfg Config, id int, c Actor) *worker {
	addr := cfg.Addr
	if len(cfg.Addrs) > 0 {
		addr = cfg.Addrs[id%len(cfg.Addrs)]
	}
	return &worker{
		cfg: cfg, id: id, customer: c, auth: "Bearer " + c.Token,
		conn: httpc.Dial(addr, cfg.Timeout),
		rng:  rand.New(rand.NewPCG(cfg.Seed+uint64(id)*7919, uint64(time.Now().UnixNano()))),
		t:    newTally(),
		buf:  make([]byte, 0, 1024), body: make([]byte, 0, 512), pick: make([]int, 0, 3),
	}
}

const prepOrders = 50

func (w *worker) prepare(ctx context.Context) error {
	switch w.cfg.Scenario {
	case "replay", "mixed":
		n := prepOrders
		if w.cfg.Scenario == "mixed" {
			n = 20
		}
		for i := 0; i < n && ctx.Err() == nil; i++ {
			req := w.placeSpread()
			res, err := w.conn.Do(req)
			if err != nil {
				return fmt.Errorf("prepare %s: %w", w.cfg.Scenario, err)
			}
			if res.Status != 201 || res.Replayed {
				return fmt.Errorf("prepare %s: placement answered %d %s", w.cfg.Scenario, res.Status, res.Body)
			}
			w.t.freshTotal++
			if w.cfg.Scenario == "replay" {
				w.saved = append(w.saved, append([]byte(nil), req...))
			} else if id, ok := orderID(res.Body); ok {
				w.orders = append(w.orders, id)
			}
		}
	}
	return ctx.Err()
}

// next sends the scenario's next request and classifies the response.
func (w *worker) next() outcome {
	switch w.cfg.Scenario {
	case "spread", "nokeys", "dispatch":
		return w.place(w.placeSpread())
	case "hot":
		return w.place(w.placeHot())
	case "replay":
		req := w.saved[w.seq%int64(len(w.saved))]
		w.seq++
		res, err := w.conn.Do(req)
		if err != nil {
			return outcome{kind: kPlace, transport: true, bad: true, example: err.Error()}
		}
		o := outcome{kind: kPlace, status: res.Status, replay: res.Replayed}
		if res.Status != 201 || !res.Replayed {
			o.bad = true
			o.fresh = res.Status == 201
			o.example = fmt.Sprintf("replay: %d replayed=%v %.200s", res.Status, res.Replayed, res.Body)
		}
		return o
	case "mixed":
		r := w.rng.IntN(10)
		switch {
		case r < 2:
			o := w.place(w.placeSpread())
			return o
		case r < 6 && len(w.orders) > 0:
			return w.get("/v1/orders/" + w.orders[w.rng.IntN(len(w.orders))])
		default:
			return w.get("/v1/products/" + w.cfg.Products[w.rng.IntN(len(w.cfg.Products))])
		}
	}
	panic("unreachable")
}

func (w *worker) place(req []byte) outcome {
	res, err := w.conn.Do(req)
	if err != nil {
		return outcome{kind: kPlace, transport: true, bad: true, example: err.Error()}
	}
	o := outcome{kind: kPlace, status: res.Status, replay: res.Replayed, fresh: res.Status == 201 && !res.Replayed}
	if !o.fresh {
		o.bad = true
		o.example = fmt.Sprintf("place: %d replayed=%v %.200s", res.Status, res.Replayed, res.Body)
	}
	if o.fresh && w.cfg.Scenario == "mixed" && len(w.orders) < 1000 {
		if id, ok := orderID(res.Body); ok {
			w.orders = append(w.orders, id)
		}
	}
	return o
}

func (w *worker) get(path string) outcome {
	w.buf = w.buf[:0]
	w.buf = append(w.buf, "GET "...)
	w.buf = append(w.buf, path...)
	w.buf = append(w.buf, " HTTP/1.1\r\nHost: bench\r\nAuthorization: "...)
	w.buf = append(w.buf, w.auth...)
	w.buf = append(w.buf, "\r\n\r\n"...)
	res, err := w.conn.Do(w.buf)
	if err != nil {
		return outcome{kind: kRead, transport: true, bad: true, example: err.Error()}
	}
	o := outcome{kind: kRead, status: res.Status, read: res.Status == 200}
	if res.Status != 200 {
		o.bad = true
		o.example = fmt.Sprintf("GET %s: %d %.200s", path, res.Status, res.Body)
	}
	return o
}

// placeSpread builds an order of 1 to 3 distinct products, 1 to 3 each.
func (w *worker) placeSpread() []byte {
	n := 1 + w.rng.IntN(3)
	w.pick = w.pick[:0]
	for len(w.pick) < n {
		p := w.rng.IntN(len(w.cfg.Products))
		dup := false
		for _, q := range w.pick {
			dup = dup || q == p
		}
		if !dup {
			w.pick = append(w.pick, p)
		}
	}
	w.body = append(w.body[:0], `{"lines":[`...)
	for i, p := range w.pick {
		if i > 0 {
			w.body = append(w.body, ',')
		}
		w.body = append(w.body, `{"product_id":"`...)
		w.body = append(w.body, w.cfg.Products[p]...)
		w.body = append(w.body, `","quantity":`...)
		w.body = strconv.AppendInt(w.body, int64(1+w.rng.IntN(3)), 10)
		w.body = append(w.body, '}')
	}
	w.body = append(w.body, "]}"...)
	return w.placeRequest()
}

// placeHot orders the first hot product, or both, one unit each.
func (w *worker) placeHot() []byte {
	w.body = append(w.body[:0], `{"lines":[{"product_id":"`...)
	w.body = append(w.body, w.cfg.Hot[0]...)
	w.body = append(w.body, `","quantity":1}`...)
	if w.rng.IntN(2) == 1 {
		w.body = append(w.body, `,{"product_id":"`...)
		w.body = append(w.body, w.cfg.Hot[1]...)
		w.body = append(w.body, `","quantity":1}`...)
	}
	w.body = append(w.body, "]}"...)
	return w.placeRequest()
}

// placeRequest wraps w.body in a POST /v1/orders with a fresh key.
func (w *worker) placeRequest() []byte {
	w.seq++
	b := w.buf[:0]
	b = append(b, "POST /v1/orders HTTP/1.1\r\nHost: bench\r\nAuthorization: "...)
	b = append(b, w.auth...)
	b = append(b, "\r\nIdempotency-Key: "...)
	b = w.key(b)
	b = append(b, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(w.body)), 10)
	b = append(b, "\r\n\r\n"...)
	b = append(b, w.body...)
	w.buf = b
	return b
}

func (w *worker) key(b []byte) []byte {
	b = append(b, w.cfg.RunID...)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(w.id), 10)
	b = append(b, '-')
	return strconv.AppendInt(b, w.seq, 10)
}

// orderID reads the id from an order body, which starts {"id":"<uuid>".
func orderID(body []byte) (string, bool) {
	const prefix = `{"id":"`
	if len(body) < len(prefix)+36 || string(body[:len(prefix)]) != prefix {
		return "", false
	}
	return string(body[len(prefix) : len(prefix)+36]), true
}

// StatusSummary renders ByStatus as "201:1234 409:3".
func (r *Result) StatusSummary() string {
	keys := make([]string, 0, len(r.ByStatus))
	for k := range r.ByStatus {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := ""
	for _, k := range keys {
		if s != "" {
			s += " "
		}
		s += k + ":" + strconv.Itoa(r.ByStatus[k])
	}
	if r.Transport > 0 {
		s += " transport:" + strconv.FormatInt(r.Transport, 10)
	}
	return s
}
