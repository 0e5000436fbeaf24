// Command chaos is the load and the webhook counter of
// deploy/compose-ha-chaos.sh (docs/ha.md).
//
//	chaos receive -addr :18588            counts deliveries by webhook-id
//	chaos load -url … -token … -product … -clients 16 -for 30s -out phase.json
//
// load places orders with fresh Idempotency-Keys from N clients, and retries
// the same key on a 503, a 409 or a broken connection, as the contract tells
// clients to, until it gets its 201 (or replayed 201); it retries after
// -retry-pause (100 ms), not the Retry-After of 1 s, so that its own pacing
// adds little to the outage it measures. It writes the acknowledged keys
// and order ids, the number of 503s and broken connections, the longest
// write outage seen by the clients together (first failed attempt to the
// next successful placement, by any client) and the latency percentiles:
// all, in flight during that outage, begun after it.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: chaos receive|load [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "receive":
		err = receive(os.Args[2:])
	case "load":
		err = load(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

// receive counts order.placed deliveries per webhook-id and per order id;
// GET /counts returns them.
func receive(args []string) error {
	fs := flag.NewFlagSet("receive", flag.ExitOnError)
	addr := fs.String("addr", ":18588", "listen address")
	_ = fs.Parse(args)
	var mu sync.Mutex
	byID := map[string]int{}         // webhook-id → deliveries
	byOrder := map[string][]string{} // order id → distinct webhook-ids
	mux := http.NewServeMux()
	mux.HandleFunc("POST /", func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			ID   string `json:"id"`
			Type string `json:"type"`
			Data struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &ev); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		id := r.Header.Get("webhook-id")
		if id == "" {
			id = ev.ID
		}
		mu.Lock()
		byID[id]++
		if ev.Type == "order.placed" && byID[id] == 1 {
			byOrder[ev.Data.ID] = append(byOrder[ev.Data.ID], id)
		}
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /counts", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"by_webhook_id": byID, "placed_by_order": byOrder})
	})
	return http.ListenAndServe(*addr, mux)
}

type result struct {
	Acknowledged map[string]string `json:"acknowledged"` // key → order id
	Unavailable  int               `json:"answers_503"`
	Broken       int               `json:"broken_connections"`
	Other        map[string]int    `json:"other_statuses"`
	// OutageSec is the longest write outage seen by the clients together:
	// from a failed attempt (503, 409 or a broken connection) to the first
	// successful placement after it, by any client. OutageFrom and OutageTo
	// are its bounds (Unix milliseconds), OutageTotalSec the sum of every
	// such window.
	OutageSec      float64 `json:"write_outage_seconds"`
	OutageFrom     int64   `json:"write_outage_from_unix_ms"`
	OutageTo       int64   `json:"write_outage_to_unix_ms"`
	OutageTotalSec float64 `json:"write_outage_total_seconds"`
	P50ms          float64 `json:"p50_ms"`
	P99ms          float64 `json:"p99_ms"`
	// P99DuringMs covers the placements in flight at some point of the
	// longest outage (their retries included), P99AfterMs those begun once
	// it was over.
	P99DuringMs float64 `json:"p99_during_outage_ms"`
	P99AfterMs  float64 `json:"p99_after_outage_ms"`
	PerSecond   float64 `json:"placements_per_second"`
	// Failures lists every failed attempt: when (Unix milliseconds) and
	// what (the status, or the connection error).
	Failures []failure `json:"failures"`
}

type failure struct {
	At   int64  `json:"at_unix_ms"`
	What string `json:"what"`
}

func load(args []string) error {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	url := fs.String("url", "http://127.0.0.1:8089", "service URL")
	token := fs.String("token", "", "customer token")
	product := fs.String("product", "", "product id")
	clients := fs.Int("clients", 16, "concurrent clients")
	dur := fs.Duration("for", 30*time.Second, "how long to start new orders")
	prefix := fs.String("prefix", "chaos", "Idempotency-Key prefix")
	// The contract's Retry-After (1 s) is what a polite client waits; this
	// load retries sooner so that the outage it measures is the server's,
	// not its own pacing (at most this pause is added to it).
	pause := fs.Duration("retry-pause", 100*time.Millisecond, "pause before retrying the same key")
	out := fs.String("out", "", "result file (JSON)")
	_ = fs.Parse(args)

	hc := &http.Client{Timeout: 30 * time.Second}
	body, _ := json.Marshal(map[string]any{"lines": []map[string]any{{"product_id": *product, "quantity": 1}}})
	var mu sync.Mutex
	res := result{Acknowledged: map[string]string{}, Other: map[string]int{}}
	// placement: a key's first attempt to its 201; attempt: when an answer
	// (or a broken connection) arrived, and whether it placed the order.
	type placement struct{ begun, done time.Time }
	type attempt struct {
		at time.Time
		ok bool
	}
	var placements []placement
	var attempts []attempt
	start := time.Now()
	var wg sync.WaitGroup
	for c := range *clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; time.Since(start) < *dur; n++ {
				key := fmt.Sprintf("%s-%d-%d", *prefix, c, n)
				t0 := time.Now()
				for {
					req, _ := http.NewRequest(http.MethodPost, *url+"/v1/orders", bytes.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+*token)
					req.Header.Set("Idempotency-Key", key)
					req.Header.Set("Content-Type", "application/json")
					r, err := hc.Do(req)
					status := 0
					var order struct {
						ID string `json:"id"`
					}
					if err == nil {
						status = r.StatusCode
						_ = json.NewDecoder(r.Body).Decode(&order)
						r.Body.Close()
					}
					now := time.Now()
					ok := status == http.StatusCreated || status == http.StatusOK
					mu.Lock()
					attempts = append(attempts, attempt{now, ok})
					switch {
					case ok:
						res.Acknowledged[key] = order.ID
						placements = append(placements, placement{t0, now})
					case err != nil:
						res.Broken++
						res.Failures = append(res.Failures, failure{now.UnixMilli(), err.Error()})
					case status == http.StatusServiceUnavailable:
						res.Unavailable++
						res.Failures = append(res.Failures, failure{now.UnixMilli(), "503 " + r.Header.Get("X-Served-By")})
					default:
						res.Other[fmt.Sprint(status)]++
						res.Failures = append(res.Failures, failure{now.UnixMilli(), fmt.Sprint(status)})
					}
					mu.Unlock()
					// Retried with the same key: a 503, a 409 (the key is
					// still in progress) or a broken connection.
					if ok || (status != 0 && status != http.StatusServiceUnavailable && status != http.StatusConflict) {
						break
					}
					time.Sleep(*pause)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	// Outage windows: from a failed attempt to the next successful one.
	slices.SortFunc(attempts, func(a, b attempt) int { return a.at.Compare(b.at) })
	var from, to time.Time
	var failed time.Time
	var total time.Duration
	for _, a := range attempts {
		switch {
		case !a.ok && failed.IsZero():
			failed = a.at
		case a.ok && !failed.IsZero():
			d := a.at.Sub(failed)
			total += d
			if d > to.Sub(from) {
				from, to = failed, a.at
			}
			failed = time.Time{}
		}
	}
	pct := func(lat []time.Duration, p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		slices.Sort(lat)
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	var all, during, after []time.Duration
	for _, p := range placements {
		took := p.done.Sub(p.begun)
		all = append(all, took)
		switch {
		case from.IsZero():
		case p.begun.After(to):
			after = append(after, took)
		case p.done.After(from):
			during = append(during, took)
		}
	}
	res.OutageSec, res.OutageTotalSec = to.Sub(from).Seconds(), total.Seconds()
	if !from.IsZero() {
		res.OutageFrom, res.OutageTo = from.UnixMilli(), to.UnixMilli()
	}
	res.P50ms, res.P99ms = pct(all, 0.50), pct(all, 0.99)
	res.P99DuringMs, res.P99AfterMs = pct(during, 0.99), pct(after, 0.99)
	res.PerSecond = float64(len(res.Acknowledged)) / elapsed.Seconds()
	raw, _ := json.MarshalIndent(res, "", "  ")
	if *out == "" {
		_, err := os.Stdout.Write(raw)
		return err
	}
	return os.WriteFile(*out, raw, 0o644)
}
