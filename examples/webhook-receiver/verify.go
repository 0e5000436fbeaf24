package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Tolerance is how far webhook-timestamp may be from the receiver's clock,
// either way. Older deliveries are refused as replays.
const Tolerance = 5 * time.Minute

// Errors a delivery can be refused with.
var (
	ErrMissingHeaders = errors.New("missing webhook-id, webhook-timestamp or webhook-signature")
	ErrOutOfTolerance = errors.New("webhook-timestamp is more than 5 minutes from now: replayed or clock skew")
	ErrNoMatch        = errors.New("no signature matches: forged, tampered, or signed with another key")
)

// ParseSecret decodes a Standard Webhooks secret, "whsec_" and the key in
// standard base64.
func ParseSecret(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(strings.TrimSpace(s), "whsec_")
	if !ok {
		return nil, errors.New(`the secret must start with "whsec_"`)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("the secret is not base64 after whsec_: %w", err)
	}
	return key, nil
}

// Verify checks one delivery against the receiver's keys (several during a
// rotation): the timestamp must be within Tolerance of now, and
// HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>" under one of the
// keys must equal one of the "v1," signatures. body is the raw request
// body, exactly as received.
func Verify(keys [][]byte, h http.Header, body []byte, now time.Time) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return ErrMissingHeaders
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrMissingHeaders
	}
	if d := now.Sub(time.Unix(sec, 0)); d > Tolerance || d < -Tolerance {
		return ErrOutOfTolerance
	}
	for _, key := range keys {
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id + "." + ts + "."))
		mac.Write(body)
		want := mac.Sum(nil)
		for _, sig := range strings.Fields(sigs) {
			b64, ok := strings.CutPrefix(sig, "v1,")
			if !ok {
				continue // another scheme (e.g. v1a): not ours to check
			}
			got, err := base64.StdEncoding.DecodeString(b64)
			if err == nil && hmac.Equal(got, want) {
				return nil
			}
		}
	}
	return ErrNoMatch
}
