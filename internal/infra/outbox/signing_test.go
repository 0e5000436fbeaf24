package outbox_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ordersvc/ordersvc/internal/infra/outbox"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// Two signing keys, as during a rotation, and one the service does not hold.
const (
	keyOld    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwb0BKx1ZMmvE="
	keyNew    = "whsec_YW5vdGhlciBzZWNyZXQga2V5IG9mIDMyIGJ5dGVzIQ=="
	keyForged = "whsec_Zm9yZ2VkIGtleSBvZiB0aGlydHktdHdvIGJ5dGVzIQ=="
)

// verify is what a receiver does (docs/events.md): the HMAC-SHA256 of
// "<webhook-id>.<webhook-timestamp>.<body>" under its key must equal one of
// the v1 signatures, and the timestamp must be within tolerance of now.
func verify(secret string, h http.Header, body []byte, now time.Time, tolerance time.Duration) string {
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if id == "" || err != nil {
		return "missing headers"
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return "timestamp outside tolerance"
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, sig := range strings.Fields(h.Get("webhook-signature")) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return "ok"
		}
	}
	return "no matching signature"
}

type captured struct {
	header http.Header
	body   []byte
}

// TestWebhookSignatures: with two keys configured (a rotation in
// progress), every delivery carries webhook-id (the event id),
// webhook-timestamp and one v1 signature per key. A receiver holding
// either key accepts it; a forged key, a tampered body, a changed id and
// a replay after the 5-minute tolerance are refused. A retry is signed
// again with its own timestamp, so that refusing old timestamps never
// refuses a genuine retry.
func TestWebhookSignatures(t *testing.T) {
	t.Parallel()
	pool := testkit.GuardedPool(t)
	var mu sync.Mutex
	var got []captured
	fail := true
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		got = append(got, captured{r.Header.Clone(), b})
		if fail {
			fail = false
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	ids := seedEvents(t, pool, 1, `{"order_id": "x"}`)
	secrets, err := outbox.ParseWebhookSecrets(keyOld + ", " + keyNew)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig(srv.URL)
	cfg.Secrets = secrets
	d := outbox.NewDispatcher(pool, testkit.Logger(t), nil, cfg)
	clock := time.Now().Add(-time.Hour)
	outbox.SignAt(d, func() time.Time { clock = clock.Add(10 * time.Second); return clock })
	ctx := context.Background()
	testkit.WaitFor(t, 10*time.Second, "the event delivered after one retry", func() bool {
		if _, err := d.DispatchOnce(ctx); err != nil {
			t.Fatal(err)
		}
		return testkit.OutboxStates(t, pool)["delivered"] == 1
	})
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("%d requests, want 2 (a 503, then the retry)", len(got))
	}
	first, retry := got[0], got[1]
	if first.header.Get("webhook-id") != ids[0] || retry.header.Get("webhook-id") != ids[0] {
		t.Errorf("webhook-id %q / %q, want the event id %s", first.header.Get("webhook-id"), retry.header.Get("webhook-id"), ids[0])
	}
	if n := len(strings.Fields(first.header.Get("webhook-signature"))); n != 2 {
		t.Errorf("%d signatures, want one per key: %q", n, first.header.Get("webhook-signature"))
	}
	if first.header.Get("webhook-timestamp") == retry.header.Get("webhook-timestamp") {
		t.Error("the retry carries the first attempt's timestamp: a receiver refusing old timestamps would refuse it")
	}
	at := func(c captured) time.Time {
		s, _ := strconv.ParseInt(c.header.Get("webhook-timestamp"), 10, 64)
		return time.Unix(s, 0)
	}
	const tolerance = 5 * time.Minute
	tampered := []byte(strings.Replace(string(retry.body), `"x"`, `"y"`, 1))
	otherID := retry.header.Clone()
	otherID.Set("webhook-id", "00000000-0000-0000-0000-000000000000")
	cases := []struct {
		name   string
		secret string
		h      http.Header
		body   []byte
		now    time.Time
		want   string
	}{
		{"receiver with the old key", keyOld, retry.header, retry.body, at(retry), "ok"},
		{"receiver with the new key (rotated)", keyNew, retry.header, retry.body, at(retry).Add(time.Minute), "ok"},
		{"forged: signed with another key", keyForged, retry.header, retry.body, at(retry), "no matching signature"},
		{"tampered body", keyNew, retry.header, tampered, at(retry), "no matching signature"},
		{"signature moved to another event id", keyNew, otherID, retry.body, at(retry), "no matching signature"},
		{"replayed 6 minutes later", keyNew, retry.header, retry.body, at(retry).Add(6 * time.Minute), "timestamp outside tolerance"},
	}
	for _, c := range cases {
		if v := verify(c.secret, c.h, c.body, c.now, tolerance); v != c.want {
			t.Errorf("%s: %s, want %s", c.name, v, c.want)
		}
	}
	t.Logf("signature header: %s", retry.header.Get("webhook-signature"))
}

// TestWebhookSecretsParse: keys are whsec_ and base64 of at least 24 bytes,
// separated by spaces or commas.
func TestWebhookSecretsParse(t *testing.T) {
	t.Parallel()
	for v, n := range map[string]int{keyOld: 1, keyOld + " " + keyNew: 2, keyOld + "," + keyNew: 2, " " + keyOld + " ,\t" + keyNew + " ": 2} {
		if keys, err := outbox.ParseWebhookSecrets(v); err != nil || len(keys) != n {
			t.Errorf("%q: %d keys, %v; want %d", v, len(keys), err, n)
		}
	}
	for _, v := range []string{"", " , ", "secret", "whsec_not base64!", "whsec_c2hvcnQ=", keyOld + " plain"} {
		if _, err := outbox.ParseWebhookSecrets(v); err == nil {
			t.Errorf("%q accepted", v)
		} else if strings.Contains(err.Error(), "c2hvcnQ") {
			t.Errorf("%q: the error repeats the secret: %v", v, err)
		}
	}
}

// The test vector that the Standard Webhooks project publishes with every
// one of its reference libraries (libraries/*/…: "sign function works",
// TestWebhookSign): this secret, id, timestamp and body sign to this
// signature. The secret is 24 bytes, the shortest the specification allows.
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTimestamp = "1614265330"
	vectorBody      = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

// TestWebhookSignatureMatchesTheStandardWebhooksVector: the service's
// signer, given the secret through OUTBOX_WEBHOOK_SECRET's parser, produces
// the published signature, so a receiver using any Standard Webhooks library
// accepts its deliveries. The usual mistakes of a hand-written signer each
// produce another signature, so the vector tells them apart: the secret used
// as text instead of its base64 key, the timestamp left out of what is
// signed, the MAC in hex.
func TestWebhookSignatureMatchesTheStandardWebhooksVector(t *testing.T) {
	t.Parallel()
	keys, err := outbox.ParseWebhookSecrets(vectorSecret)
	if err != nil {
		t.Fatalf("the published secret is refused: %v", err)
	}
	if got := outbox.Sign(keys, vectorID, vectorTimestamp, []byte(vectorBody)); got != vectorSignature {
		t.Errorf("signature %s, want the published %s", got, vectorSignature)
	}
	// With a second key (a rotation), the published signature is one of two.
	both, err := outbox.ParseWebhookSecrets(keyNew + " " + vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(outbox.Sign(both, vectorID, vectorTimestamp, []byte(vectorBody))); len(got) != 2 || got[1] != vectorSignature {
		t.Errorf("signatures %q, want two, the second the published %s", got, vectorSignature)
	}

	mac := func(key []byte, msg string) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	naive := map[string]string{
		"secret as text": "v1," + base64.StdEncoding.EncodeToString(mac([]byte(vectorSecret), vectorID+"."+vectorTimestamp+"."+vectorBody)),
		"no timestamp":   "v1," + base64.StdEncoding.EncodeToString(mac(keys[0], vectorID+"."+vectorBody)),
		"hex":            "v1," + hex.EncodeToString(mac(keys[0], vectorID+"."+vectorTimestamp+"."+vectorBody)),
	}
	for name, sig := range naive {
		if sig == vectorSignature {
			t.Errorf("the naive signer %q also matches the vector: it tells nothing apart", name)
		}
	}
}
