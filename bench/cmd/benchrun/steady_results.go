package main

import "github.com/ordersvc/ordersvc/bench/internal/load"

// Steady is what the steady-state scenarios measured.
type Steady struct {
	Drain   []Drain       `json:"drain,omitempty"`
	Lag     *Lag          `json:"lag,omitempty"`
	Soak    *Soak         `json:"soak,omitempty"`
	History *History      `json:"history,omitempty"`
	Notes   []string      `json:"notes,omitempty"`
	Sizes   []SizePerMOrd `json:"sizes_per_million_orders,omitempty"`
}

// Drain is one backlog drained by the dispatcher with nothing else running.
type Drain struct {
	Events         int     `json:"events"`
	Concurrency    int     `json:"concurrency"`
	ReceiverMillis float64 `json:"receiver_latency_ms"`
	Delivered      int64   `json:"delivered"`
	Seconds        float64 `json:"seconds"`
	PerSecond      float64 `json:"events_per_second"`
	Bound          float64 `json:"bound_per_second,omitempty"` // concurrency ÷ latency, for a slow receiver
	Truncated      bool    `json:"truncated"`
}

// Lag is the oldest undelivered event's age under the highest sustained
// placement rate (closed loop at the top concurrency).
type Lag struct {
	Concurrency int              `json:"concurrency"`
	Throughput  float64          `json:"placements_per_second"`
	Latency     load.Percentiles `json:"latency_ms"`
	MaxAge      float64          `json:"max_oldest_pending_s"`
	P50Age      float64          `json:"p50_oldest_pending_s"`
	LastAge     float64          `json:"last_oldest_pending_s"`
	Placed      int64            `json:"placed"`
	Delivered   int64            `json:"delivered_by_end"`
	Unexpected  int64            `json:"unexpected"`
	Truncated   bool             `json:"truncated"`
}

// Soak is a long run at a fixed rate, nothing truncated, in 10 s windows.
type Soak struct {
	Rate        float64          `json:"rate"`
	Peak        float64          `json:"peak"`
	Seconds     float64          `json:"seconds"`
	Env         []string         `json:"service_env"`
	Windows     []SoakWindow     `json:"windows"`
	Unexpected  int64            `json:"unexpected"`
	Invariants  *load.Invariants `json:"invariants,omitempty"`
	StartOrders int64            `json:"orders_at_start"`
}

// SoakWindow is one 10-second window of the soak.
type SoakWindow struct {
	At          float64 `json:"t_s"` // end of the window, seconds since the start
	Throughput  float64 `json:"orders_per_s"`
	P50         float64 `json:"p50_ms"`
	P99         float64 `json:"p99_ms"`
	MaxAge      float64 `json:"max_oldest_pending_s"`
	Orders      int64   `json:"cumulative_orders"`
	OrdersBytes int64   `json:"orders_bytes"`
	KeysBytes   int64   `json:"idempotency_bytes"`
	OutboxBytes int64   `json:"outbox_bytes"`
	Unexpected  int64   `json:"unexpected"`
}

// History compares placements of one customer with a long history against
// a customer with none, in the same run.
type History struct {
	Orders      int     `json:"history_orders"`
	Concurrency int     `json:"concurrency"`
	Heavy       float64 `json:"heavy_per_s"`
	Fresh       float64 `json:"fresh_per_s"`
	HeavyP50    float64 `json:"heavy_p50_ms"`
	FreshP50    float64 `json:"fresh_p50_ms"`
	Ratio       float64 `json:"ratio"`
	Rounds      int     `json:"rounds"`
	LoadSeconds float64 `json:"bulk_load_s"`
}

// SizePerMOrd is a table's size scaled to a million orders at the end of
// the soak.
type SizePerMOrd struct {
	Table string  `json:"table"`
	Bytes int64   `json:"bytes"`
	PerM  float64 `json:"mib_per_million_orders"`
}
