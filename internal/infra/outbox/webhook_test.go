package outbox_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ordersvc/ordersvc/internal/infra/outbox"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// TestWebhookErrorTextIsValidUTF8: a receiver refuses deliveries with a body
// of two-byte characters, so that a cut after 200 bytes falls inside one. The text kept in
// last_error is cut on a character boundary, so PostgreSQL accepts it and
// the outcome is recorded: the 503 goes back to pending with its backoff,
// the 400 goes dead. Cut at a byte count, the text was invalid UTF-8, the
// update failed, and both events stayed claimed until the reaper, losing
// their backoff and the dead state.
func TestWebhookErrorTextIsValidUTF8(t *testing.T) {
	t.Parallel()
	pool := testkit.GuardedPool(t)
	// é is 2 bytes; after one ASCII byte, every odd byte offset falls
	// inside a character: the body's 200th byte, and the 200th byte of
	// "receiver answered <status> <body>" for both statuses.
	body := "a" + strings.Repeat("é", 150)
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status := http.StatusServiceUnavailable
		var ev struct{ Data map[string]any }
		_ = json.NewDecoder(r.Body).Decode(&ev)
		if ev.Data["answer"] == "400" {
			status = http.StatusBadRequest
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	seedEvents(t, pool, 1, `{"answer": "503"}`)
	seedEvents(t, pool, 1, `{"answer": "400"}`)
	cfg := fastConfig(srv.URL)
	cfg.BackoffBase, cfg.BackoffMax = time.Minute, time.Hour
	d := outbox.NewDispatcher(pool, testkit.Logger(t), nil, cfg)
	if _, err := d.DispatchOnce(context.Background()); err != nil {
		t.Errorf("dispatch: %v", err)
	}
	rows, err := pool.Query(context.Background(), `SELECT payload->>'answer', state, coalesce(last_error, ''), available_at > now() FROM outbox_events ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	want := map[string]string{"400": "dead", "503": "pending"}
	for rows.Next() {
		var answer, state, lastErr string
		var later bool
		if err := rows.Scan(&answer, &state, &lastErr, &later); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s, last_error %d bytes, ends %q", answer, state, len(lastErr), string([]rune(lastErr)[max(0, utf8.RuneCountInString(lastErr)-8):]))
		if state != want[answer] {
			t.Errorf("receiver answering %s: event %s, want %s (the outcome was not recorded)", answer, state, want[answer])
		}
		if !utf8.ValidString(lastErr) || lastErr == "" || len(lastErr) > 260 {
			t.Errorf("receiver answering %s: last_error %q", answer, lastErr)
		}
		if answer == "503" && !later {
			t.Errorf("the 503 is due again at once: its backoff was lost")
		}
	}
}
