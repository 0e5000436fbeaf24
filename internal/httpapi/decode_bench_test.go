package httpapi

import (
	"bytes"
	stdjson "encoding/json"
	"fmt"
	"strings"
	"testing"
)

// placementBody is a placement of n lines, as a client sends it.
func placementBody(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"lines":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"product_id":"01a237b6-85a5-7acf-9996-41632f2c%04d","quantity":%d}`, i, i+1)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// BenchmarkDecodePlacement reads placement bodies strictly, as decode does
// (ADR 0010: duplicates and case-insensitive names refused, by
// go-json-experiment/json). Compare in the same run with
// BenchmarkDecodePlacementEncodingJSON, the encoding/json reading that it
// replaced, which accepted both:
//
//	go test -run '^$' -bench 'DecodePlacement' -benchmem ./internal/httpapi/
func BenchmarkDecodePlacement(b *testing.B) {
	for _, n := range []int{1, 10, 50} {
		body := placementBody(n)
		b.Run(fmt.Sprintf("lines=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				var in placeOrderIn
				if err := decodeBytes(body, &in, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodePlacementEncodingJSON is the previous reading: encoding/json
// with unknown fields refused, the lines as raw messages decoded one by one
// so that a type error could name its index.
func BenchmarkDecodePlacementEncodingJSON(b *testing.B) {
	type envelope struct {
		Lines *[]stdjson.RawMessage `json:"lines"`
	}
	for _, n := range []int{1, 10, 50} {
		body := placementBody(n)
		b.Run(fmt.Sprintf("lines=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				var in envelope
				dec := stdjson.NewDecoder(bytes.NewReader(body))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&in); err != nil {
					b.Fatal(err)
				}
				for _, raw := range *in.Lines {
					var l orderLineIn
					d := stdjson.NewDecoder(bytes.NewReader(raw))
					d.DisallowUnknownFields()
					if err := d.Decode(&l); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
