package main

import (
	"fmt"
	"time"

	"github.com/ordersvc/ordersvc/bench/internal/load"
)

// Results is everything one benchmark run measured.
type Results struct {
	Label    string    `json:"label"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Machine  Machine   `json:"machine"`
	Settings Settings  `json:"settings"`
	Counting Counting  `json:"counting"`
	Runs     []Run     `json:"runs"`
	HalfPeak *HalfPeak `json:"half_peak,omitempty"`
	Steady   *Steady   `json:"steady,omitempty"`
	Failed   bool      `json:"failed"`
}

// Machine is where the numbers come from.
type Machine struct {
	NProc    int     `json:"nproc"`
	CPUModel string  `json:"cpu_model"`
	MemGiB   float64 `json:"mem_gib"`
	Kernel   string  `json:"kernel"`
	Postgres string  `json:"postgres"`
	Go       string  `json:"go"`
	Commit   string  `json:"commit"`
}

// Settings of the run.
type Settings struct {
	Duration   string   `json:"duration"`
	Warmup     string   `json:"warmup"`
	APIEnv     []string `json:"api_env,omitempty"`
	PGSettings []string `json:"pg_settings"`
}

// Counting is what one request sends to PostgreSQL.
type Counting struct {
	Placement *Exchange `json:"placement,omitempty"`
	Replay    *Exchange `json:"replay,omitempty"`
	Pgbench   *Exchange `json:"pgbench,omitempty"`
	// Pipelined is the pipelined placement script: the same statements in
	// one round trip per order.
	Pipelined *Exchange `json:"pipelined,omitempty"`
	// Work is what one request of each kind costs PostgreSQL
	// (pg_stat_statements) and the service (CPU, latency): pgss.go.
	Work []*Work `json:"work,omitempty"`
}

// Exchange counts statements and round trips per request.
type Exchange struct {
	Requests   int      `json:"requests"`
	Statements float64  `json:"statements_per_request"`
	RoundTrips float64  `json:"round_trips_per_request"`
	Sequence   []string `json:"sequence"` // the statements of one request
}

// Run is one measured run.
type Run struct {
	Kind         string            `json:"kind"`     // service or pgbench
	Scenario     string            `json:"scenario"` // for pgbench: placement or hot
	Mode         string            `json:"mode"`
	Concurrency  int               `json:"concurrency"`
	Rate         float64           `json:"rate,omitempty"`
	Seconds      float64           `json:"seconds"`
	Throughput   float64           `json:"throughput"`
	Requests     int64             `json:"requests"`
	Orders       int64             `json:"orders"`
	ByStatus     map[string]int    `json:"by_status,omitempty"`
	Unexpected   int64             `json:"unexpected"`
	Examples     []string          `json:"examples,omitempty"`
	Latency      load.Percentiles  `json:"latency_ms"`
	PlaceLatency *load.Percentiles `json:"place_latency_ms,omitempty"`
	ReadLatency  *load.Percentiles `json:"read_latency_ms,omitempty"`
	CPU          CPU               `json:"cpu_seconds"`
	Invariants   *load.Invariants  `json:"invariants,omitempty"`
	Failed       bool              `json:"failed"`
	Why          []string          `json:"why,omitempty"`
}

// CPU seconds spent in the measured window.
type CPU struct {
	API      float64 `json:"api"`
	Postgres float64 `json:"postgres"`
	Client   float64 `json:"client"` // load generator or pgbench
	// Other is the CPU that the rest of the machine used meanwhile (other
	// users' builds and tests on a shared box): the noise in the figures.
	Other float64 `json:"other"`
}

// HalfPeak compares latency at half the service's peak spread throughput.
type HalfPeak struct {
	Rate    float64 `json:"rate"`
	Service Run     `json:"service"`
	Pgbench Run     `json:"pgbench"`
}

// judge marks a run FAILED when an invariant broke or a response was not
// what the scenario expects.
func judge(r *Run) {
	if r.Invariants != nil && !r.Invariants.OK() {
		r.Failed = true
		r.Why = append(r.Why, r.Invariants.Violations...)
	}
	if r.Unexpected > 0 {
		r.Failed = true
		r.Why = append(r.Why, fmt.Sprintf("%d unexpected responses, e.g. %v", r.Unexpected, r.Examples))
	}
}
