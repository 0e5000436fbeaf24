// Command webhook-receiver is a minimal receiver of the service's outbox
// events that verifies their Standard Webhooks signature (docs/events.md):
// it refuses unsigned, forged, tampered and replayed deliveries with 401,
// drops duplicates by webhook-id, and logs each event it accepts.
//
//	WEBHOOK_SECRET="whsec_…" ADDR=:9090 go run ./examples/webhook-receiver
//
// and point the service at it with OUTBOX_WEBHOOK_URL=http://host:9090/ and
// the same OUTBOX_WEBHOOK_SECRET. WEBHOOK_SECRET may hold several keys,
// separated by spaces, while a key is being rotated.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var keys [][]byte
	for _, s := range strings.Fields(strings.ReplaceAll(os.Getenv("WEBHOOK_SECRET"), ",", " ")) {
		k, err := ParseSecret(s)
		if err != nil {
			fmt.Fprintln(os.Stderr, "WEBHOOK_SECRET:", err)
			os.Exit(2)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		fmt.Fprintln(os.Stderr, "WEBHOOK_SECRET is required (the service's OUTBOX_WEBHOOK_SECRET)")
		os.Exit(2)
	}
	addr := os.Getenv("ADDR")
	if addr == "" {
		addr = ":9090"
	}
	srv := &http.Server{Addr: addr, Handler: NewHandler(keys, log, time.Now), ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("listening", "addr", addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// Event is the body of a delivery.
type Event struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	OccurredAt time.Time       `json:"occurred_at"`
	Data       json.RawMessage `json:"data"`
}

// NewHandler verifies each delivery before anything else, then
// deduplicates it by webhook-id: delivery is at least once, and a genuine
// request captured and replayed within the tolerance is a duplicate too.
// The ids are kept for twice the tolerance; a real receiver keeps them in
// its database, with its own processing, in one transaction.
func NewHandler(keys [][]byte, log *slog.Logger, now func() time.Time) http.Handler {
	var mu sync.Mutex
	seen := map[string]time.Time{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		t := now()
		if err := Verify(keys, r.Header, body, t); err != nil {
			log.Warn("delivery refused", "err", err, "webhook_id", r.Header.Get("webhook-id"))
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var ev Event
		if err := json.Unmarshal(body, &ev); err != nil || ev.ID != r.Header.Get("webhook-id") {
			http.Error(w, "body is not an event with the id of webhook-id", http.StatusBadRequest)
			return
		}
		mu.Lock()
		for id, at := range seen {
			if t.Sub(at) > 2*Tolerance {
				delete(seen, id)
			}
		}
		_, dup := seen[ev.ID]
		seen[ev.ID] = t
		mu.Unlock()
		if dup {
			log.Info("duplicate delivery dropped", "id", ev.ID, "type", ev.Type)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		log.Info("event", "id", ev.ID, "type", ev.Type, "occurred_at", ev.OccurredAt, "data", string(ev.Data))
		w.WriteHeader(http.StatusNoContent)
	})
}
