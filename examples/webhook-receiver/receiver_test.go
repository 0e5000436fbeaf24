package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ordersvc/ordersvc/internal/infra/outbox"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

const (
	secretOld   = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwb0BKx1ZMmvE="
	secretNew   = "whsec_YW5vdGhlciBzZWNyZXQga2V5IG9mIDMyIGJ5dGVzIQ=="
	secretOther = "whsec_Zm9yZ2VkIGtleSBvZiB0aGlydHktdHdvIGJ5dGVzIQ=="
)

func keys(t *testing.T, secrets ...string) [][]byte {
	t.Helper()
	var out [][]byte
	for _, s := range secrets {
		k, err := ParseSecret(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, k)
	}
	return out
}

type delivery struct {
	header http.Header
	body   []byte
	status int
}

// deliver runs the service's real dispatcher, signing with serviceSecrets,
// against this receiver holding receiverSecrets, for n events, and returns
// what the receiver got and answered, and the events' states.
func deliver(t *testing.T, serviceSecrets string, receiverSecrets []string, n int) ([]delivery, map[string]int) {
	t.Helper()
	e := testkit.New(t)
	for range n {
		e.Exec(`INSERT INTO outbox_events (id, type, aggregate_id, payload) VALUES (gen_random_uuid(), 'stock.adjusted', gen_random_uuid(), '{"delta": 1}')`)
	}
	var mu sync.Mutex
	var got []delivery
	h := NewHandler(keys(t, receiverSecrets...), slog.New(slog.NewTextHandler(t.Output(), nil)), time.Now)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec := httptest.NewRecorder()
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(rec, r)
		mu.Lock()
		got = append(got, delivery{r.Header.Clone(), body, rec.Code})
		mu.Unlock()
		w.WriteHeader(rec.Code)
	}))
	defer srv.Close()
	secrets, err := outbox.ParseWebhookSecrets(serviceSecrets)
	if err != nil {
		t.Fatal(err)
	}
	d := outbox.NewDispatcher(e.Pool, testkit.Logger(t), nil, outbox.OutboxConfig{WebhookURL: srv.URL, Secrets: secrets, MaxAttempts: 1})
	if _, err := d.DispatchOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	states := map[string]int{}
	rows, err := e.Pool.Query(context.Background(), `SELECT state FROM outbox_events`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		states[s]++
	}
	mu.Lock()
	defer mu.Unlock()
	return got, states
}

// TestReceiverAcceptsTheServiceDeliveries: the service's dispatcher, signing
// with the secret the receiver holds, gets every event accepted (204) and
// marked delivered.
func TestReceiverAcceptsTheServiceDeliveries(t *testing.T) {
	t.Parallel()
	got, states := deliver(t, secretOld, []string{secretOld}, 3)
	if states["delivered"] != 3 {
		t.Errorf("states: %v, want 3 delivered", states)
	}
	for _, g := range got {
		if g.status != http.StatusNoContent {
			t.Errorf("receiver answered %d", g.status)
		}
	}
}

// TestReceiverAcceptsDuringRotation: while the service signs with the old
// and the new key, a receiver holding either one accepts; once the service
// has dropped the old key, a receiver still on it refuses (401) and the
// events go dead, to be requeued once the keys agree.
func TestReceiverAcceptsDuringRotation(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		service  string
		receiver []string
		want     string
	}{
		"service old+new, receiver old":      {secretOld + " " + secretNew, []string{secretOld}, "delivered"},
		"service old+new, receiver new":      {secretOld + "," + secretNew, []string{secretNew}, "delivered"},
		"service new, receiver old+new":      {secretNew, []string{secretOld, secretNew}, "delivered"},
		"service new, receiver still old":    {secretNew, []string{secretOld}, "dead"},
		"service with a key nobody else has": {secretOther, []string{secretOld, secretNew}, "dead"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, states := deliver(t, c.service, c.receiver, 2)
			if states[c.want] != 2 {
				t.Errorf("states %v, want 2 %s", states, c.want)
			}
			if len(got) > 0 {
				t.Logf("receiver answered %d", got[0].status)
			}
		})
	}
}

// TestReceiverRefusesForgedTamperedAndReplayed takes one genuine delivery
// of the service and shows what the receiver refuses: no signature, a
// signature made with another key, a changed body, a signature moved to
// another id, and the genuine request replayed more than 5 minutes later;
// and that the genuine request replayed within the 5 minutes is dropped as
// a duplicate, not processed twice.
func TestReceiverRefusesForgedTamperedAndReplayed(t *testing.T) {
	t.Parallel()
	got, _ := deliver(t, secretOld, []string{secretOld}, 1)
	if len(got) != 1 {
		t.Fatalf("%d deliveries", len(got))
	}
	genuine := got[0]
	sent := time.Now()
	k := keys(t, secretOld)
	forgedKey := keys(t, secretOther)

	forged := genuine.header.Clone()
	forged.Set("webhook-signature", signWith(forgedKey[0], genuine.header.Get("webhook-id"), genuine.header.Get("webhook-timestamp"), genuine.body))
	unsigned := genuine.header.Clone()
	unsigned.Del("webhook-signature")
	moved := genuine.header.Clone()
	moved.Set("webhook-id", "0193a8f2-0000-7000-8000-000000000000")
	tampered := bytes.Replace(genuine.body, []byte(`"delta":1`), []byte(`"delta":1000`), 1)
	if bytes.Equal(tampered, genuine.body) {
		t.Fatalf("body %s has no delta to tamper with", genuine.body)
	}
	for _, c := range []struct {
		name string
		h    http.Header
		body []byte
		at   time.Time
		want error
	}{
		{"genuine", genuine.header, genuine.body, sent, nil},
		{"genuine, 4 minutes later", genuine.header, genuine.body, sent.Add(4 * time.Minute), nil},
		{"unsigned", unsigned, genuine.body, sent, ErrMissingHeaders},
		{"forged with another key", forged, genuine.body, sent, ErrNoMatch},
		{"tampered body", genuine.header, tampered, sent, ErrNoMatch},
		{"signature moved to another id", moved, genuine.body, sent, ErrNoMatch},
		{"replayed 6 minutes later", genuine.header, genuine.body, sent.Add(6 * time.Minute), ErrOutOfTolerance},
	} {
		if err := Verify(k, c.h, c.body, c.at); err != c.want {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}

	// Through the handler: the replay within tolerance is a duplicate.
	var logs bytes.Buffer
	h := NewHandler(k, slog.New(slog.NewTextHandler(&logs, nil)), func() time.Time { return sent })
	for i := range 2 {
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(genuine.body))
		req.Header = genuine.header.Clone()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusNoContent {
			t.Errorf("request %d: %d", i+1, rec.Code)
		}
	}
	if n := strings.Count(logs.String(), "msg=event "); n != 1 {
		t.Errorf("the event was processed %d times, want once (the replay is a duplicate)\n%s", n, logs.String())
	}

}

// signWith signs as the service does, with key.
func signWith(key []byte, id, ts string, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
