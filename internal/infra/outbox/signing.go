package outbox

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
)

// secretPrefix marks a Standard Webhooks secret: the rest is the key in
// base64.
const secretPrefix = "whsec_"

// minSecretBytes is the shortest signing key accepted. Standard Webhooks
// recommends 24 to 64 random bytes.
const minSecretBytes = 24

// ParseWebhookSecrets reads OUTBOX_WEBHOOK_SECRET: one or more keys, each
// "whsec_" followed by the key in standard base64, separated by spaces or
// commas. Each delivery carries one signature per key, so that a receiver
// can move to a new key without a moment where deliveries fail: add the new
// key here, let the receiver accept it, then drop the old one.
func ParseWebhookSecrets(v string) ([][]byte, error) {
	var keys [][]byte
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' || r == '\n' }) {
		b64, ok := strings.CutPrefix(f, secretPrefix)
		if !ok {
			return nil, fmt.Errorf("key %d does not start with %q", len(keys)+1, secretPrefix)
		}
		k, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, fmt.Errorf("key %d is not standard base64 after %q", len(keys)+1, secretPrefix)
		}
		if len(k) < minSecretBytes {
			return nil, fmt.Errorf("key %d has %d bytes, want at least %d random bytes", len(keys)+1, len(k), minSecretBytes)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("no key")
	}
	return keys, nil
}

// sign returns the webhook-signature header of Standard Webhooks: for each
// key, "v1," and the base64 HMAC-SHA256 of "<id>.<timestamp>.<body>",
// space-separated. The timestamp is part of what is signed, so a receiver
// that refuses old timestamps refuses replays of captured deliveries.
func sign(keys [][]byte, id, timestamp string, body []byte) string {
	sigs := make([]string, len(keys))
	for i, k := range keys {
		mac := hmac.New(sha256.New, k)
		mac.Write([]byte(id))
		mac.Write([]byte{'.'})
		mac.Write([]byte(timestamp))
		mac.Write([]byte{'.'})
		mac.Write(body)
		sigs[i] = "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	}
	return strings.Join(sigs, " ")
}
