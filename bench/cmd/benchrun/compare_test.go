package main

import (
	"encoding/binary"
	"testing"
)

// field encodes a length-delimited protobuf field.
func field(num int, payload ...[]byte) []byte {
	var body []byte
	for _, p := range payload {
		body = append(body, p...)
	}
	b := binary.AppendUvarint(nil, uint64(num)<<3|2)
	b = binary.AppendUvarint(b, uint64(len(body)))
	return append(b, body...)
}

// varintField encodes a varint protobuf field.
func varintField(num int, v uint64) []byte {
	return binary.AppendUvarint(binary.AppendUvarint(nil, uint64(num)<<3), v)
}

func TestCountSpans(t *testing.T) {
	span := func(name string) []byte {
		return field(2, field(1, []byte("0123456789abcdef")), field(5, []byte(name)), varintField(6, 2))
	}
	req := field(1, // resource_spans
		field(1, field(1, []byte("service.name"))), // resource
		field(2, field(1, []byte("scope")), span("a"), span("b")),
		field(2, span("c")),
	)
	req = append(req, field(1, field(2, span("d")))...)
	n, err := countSpans(req)
	if err != nil || n != 4 {
		t.Fatalf("countSpans = %d, %v; want 4", n, err)
	}
	if _, err := countSpans(req[:len(req)-3]); err == nil {
		t.Error("a truncated request was read")
	}
}
