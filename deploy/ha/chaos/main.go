// Command chaos is the load and the webhook counter of
// deploy/compose-ha-chaos.sh (docs/ha.md).
//
//	chaos receive -addr :18588            counts deliveries by webhook-id
//	chaos load -url … -token … -product … -clients 16 -for 30s -out phase.json
//
// load places orders with fresh Idempotency-Keys from N clients, and retries
// the same key on a 503 or a broken connection, as the contract tells
// clients to, until it gets its 201 (or replayed 201). It writes the
// acknowledged keys and order ids, the number of 503s and broken
// connections, the write outage (first failed to first successful
// placement after it) and the latency percentiles.
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
	OutageSec    float64           `json:"write_outage_seconds"`
	P50ms        float64           `json:"p50_ms"`
	P99ms        float64           `json:"p99_ms"`
	// P99AfterMs covers the placements begun once the longest outage was
	// over.
	P99AfterMs float64 `json:"p99_after_outage_ms"`
	PerSecond  float64 `json:"placements_per_second"`
}

func load(args []string) error {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	url := fs.String("url", "http://127.0.0.1:8089", "service URL")
	token := fs.String("token", "", "customer token")
	product := fs.String("product", "", "product id")
	clients := fs.Int("clients", 16, "concurrent clients")
	dur := fs.Duration("for", 30*time.Second, "how long to start new orders")
	prefix := fs.String("prefix", "chaos", "Idempotency-Key prefix")
	out := fs.String("out", "", "result file (JSON)")
	_ = fs.Parse(args)

	hc := &http.Client{Timeout: 30 * time.Second}
	body, _ := json.Marshal(map[string]any{"lines": []map[string]any{{"product_id": *product, "quantity": 1}}})
	var mu sync.Mutex
	res := result{Acknowledged: map[string]string{}, Other: map[string]int{}}
	type sample struct {
		begun time.Time
		took  time.Duration
	}
	var lat []time.Duration
	var samples []sample
	var firstFail, recovered, outageEnd time.Time
	var longest time.Duration
	var outage time.Duration
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
					mu.Lock()
					switch {
					case status == http.StatusCreated || status == http.StatusOK:
						res.Acknowledged[key] = order.ID
						lat = append(lat, now.Sub(t0))
						samples = append(samples, sample{t0, now.Sub(t0)})
						if !firstFail.IsZero() && recovered.IsZero() {
							recovered = now
							if d := recovered.Sub(firstFail); d > longest {
								longest, outageEnd = d, now
							}
							outage += recovered.Sub(firstFail)
							firstFail, recovered = time.Time{}, time.Time{}
						}
					case err != nil:
						res.Broken++
					case status == http.StatusServiceUnavailable:
						res.Unavailable++
					default:
						res.Other[fmt.Sprint(status)]++
					}
					if status != http.StatusCreated && status != http.StatusOK && firstFail.IsZero() {
						firstFail = now
					}
					done := status == http.StatusCreated || status == http.StatusOK ||
						(status != 0 && status != http.StatusServiceUnavailable && status != http.StatusConflict)
					mu.Unlock()
					if done {
						break
					}
					time.Sleep(200 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	pct := func(lat []time.Duration, p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		slices.Sort(lat)
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	var after []time.Duration
	for _, s := range samples {
		if s.begun.After(outageEnd) {
			after = append(after, s.took)
		}
	}
	res.OutageSec = outage.Seconds()
	res.P50ms, res.P99ms, res.P99AfterMs = pct(lat, 0.50), pct(lat, 0.99), pct(after, 0.99)
	res.PerSecond = float64(len(res.Acknowledged)) / elapsed.Seconds()
	raw, _ := json.MarshalIndent(res, "", "  ")
	if *out == "" {
		_, err := os.Stdout.Write(raw)
		return err
	}
	return os.WriteFile(*out, raw, 0o644)
}
