package httpapi

import (
	"encoding/json"
	"testing"
)

// BenchmarkJSONEncoders: each body the hand-written encoders produce, by
// hand and through encoding/json, in one run.
func BenchmarkJSONEncoders(b *testing.B) {
	o := toOrderJSON(benchOrder())
	cmd := benchPlaceCommand()
	for _, c := range []struct {
		name string
		fn   func() ([]byte, error)
	}{
		{"order/hand", func() ([]byte, error) { return marshal(o) }},
		{"order/encoding_json", func() ([]byte, error) { return json.Marshal(o) }},
		{"placement_fingerprint/hand", func() ([]byte, error) { return canonical(cmd) }},
		{"placement_fingerprint/encoding_json", func() ([]byte, error) { return json.Marshal(cmd) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.fn(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
