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
	"sort"
	"strconv"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
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

// Probes are workloads that Run accepts but the matrix does not run: "read"
// (GET of one of the worker's own orders, placed beforehand) and "livez"
// (GET /livez: the HTTP hop alone, no statement). The harness's
// pg_stat_statements phase measures one request of each.
var Probes = []string{"read", "livez"}

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
	case "read", "livez":
		return float64(r.Reads) / r.Seconds
	}
	return float64(r.Orders) / r.Seconds
}

const (
	kPlace kind = iota
	kRead
)

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
