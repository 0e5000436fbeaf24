package main

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The test vector that the Standard Webhooks project publishes with every one
// of its reference libraries ("sign function works", TestWebhookSign): a
// delivery with this id, timestamp and body, signed with this secret,
// carries this signature.
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTimestamp = "1614265330"
	vectorBody      = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

// TestReceiverAcceptsTheStandardWebhooksVector: the receiver verifies what
// any Standard Webhooks sender signs, not only this service: the published
// delivery is accepted at its own timestamp, also among signatures of other
// schemes and keys (the specification's rotation example), and refused with
// one byte of the body changed, with another id, or 6 minutes later.
func TestReceiverAcceptsTheStandardWebhooksVector(t *testing.T) {
	t.Parallel()
	key, err := ParseSecret(vectorSecret)
	if err != nil {
		t.Fatalf("the published secret is refused: %v", err)
	}
	keys := [][]byte{key}
	at := time.Unix(1614265330, 0)
	header := func(id, sigs string) http.Header {
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", vectorTimestamp)
		h.Set("webhook-signature", sigs)
		return h
	}
	other := "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="
	for _, c := range []struct {
		name string
		h    http.Header
		body string
		now  time.Time
		want error
	}{
		{"the published delivery", header(vectorID, vectorSignature), vectorBody, at, nil},
		{"among other signatures", header(vectorID, other+" v1a,"+other[3:]+" "+vectorSignature+" "+other), vectorBody, at, nil},
		{"one byte of the body changed", header(vectorID, vectorSignature), strings.Replace(vectorBody, "4", "5", 1), at, ErrNoMatch},
		{"another id", header("msg_p5jXN8AQM9LWM0D4loKWxJel", vectorSignature), vectorBody, at, ErrNoMatch},
		{"6 minutes later", header(vectorID, vectorSignature), vectorBody, at.Add(6 * time.Minute), ErrOutOfTolerance},
	} {
		if err := Verify(keys, c.h, []byte(c.body), c.now); err != c.want {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if got := signWith(key, vectorID, vectorTimestamp, []byte(vectorBody)); got != vectorSignature {
		t.Errorf("signWith (the tests' signer) gives %s, want %s", got, vectorSignature)
	}

	// Through the handler: the signature check passes it, and the body, which
	// is no event of this service, is what it refuses (400, not 401).
	var logs bytes.Buffer
	h := NewHandler(keys, slog.New(slog.NewTextHandler(&logs, nil)), func() time.Time { return at })
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(vectorBody))
	req.Header = header(vectorID, vectorSignature)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest || strings.Contains(logs.String(), "delivery refused") {
		t.Errorf("the published delivery answered %d, want 400 past the signature check\n%s", rec.Code, logs.String())
	}
}
