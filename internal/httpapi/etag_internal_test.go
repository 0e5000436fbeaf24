package httpapi

import (
	"testing"

	"github.com/ordersvc/ordersvc/internal/domain"
)

func TestETag(t *testing.T) {
	t.Parallel()
	for v, want := range map[domain.Version]string{1: `"v1"`, 7: `"v7"`, 1234567890123: `"v1234567890123"`} {
		if got := etag(v); got != want {
			t.Errorf("etag(%d) = %s, want %s", v, got, want)
		}
	}
}

// TestParseIfMatch: only a strong tag that names a version counts; a missing
// header or * needs a precondition (428), anything else can never match (409)
// (EXT.CONCURRENCY.VERSION.001).
func TestParseIfMatch(t *testing.T) {
	t.Parallel()
	cases := []struct {
		header string
		v      domain.Version
		res    ifMatchResult
	}{
		{"", 0, ifMatchMissing},
		{"   ", 0, ifMatchMissing},
		{"*", 0, ifMatchMissing},
		{" * ", 0, ifMatchMissing},
		{`"v1"`, 1, ifMatchVersion},
		{` "v42" `, 42, ifMatchVersion},
		{`"v9223372036854775807"`, 9223372036854775807, ifMatchVersion},
		{`"v1", "v2"`, 1, ifMatchVersion},
		{`W/"v3", "v2"`, 2, ifMatchVersion},
		{`"x", "v5"`, 5, ifMatchVersion},

		{`W/"v1"`, 0, ifMatchNoneKnown},
		{`w/"v1"`, 0, ifMatchNoneKnown},
		{`"v0"`, 0, ifMatchNoneKnown},
		{`"v-1"`, 0, ifMatchNoneKnown},
		{`"v+1"`, 0, ifMatchNoneKnown},
		{`"v01"`, 0, ifMatchNoneKnown},
		{`"v 1"`, 0, ifMatchNoneKnown},
		{`"v1.0"`, 0, ifMatchNoneKnown},
		{`"v"`, 0, ifMatchNoneKnown},
		{`""`, 0, ifMatchNoneKnown},
		{`"V1"`, 0, ifMatchNoneKnown},
		{`"p1"`, 0, ifMatchNoneKnown},
		{`v1`, 0, ifMatchNoneKnown},
		{`"v1`, 0, ifMatchNoneKnown},
		{`"v1"x`, 0, ifMatchNoneKnown},
		{`"v9223372036854775808"`, 0, ifMatchNoneKnown},
		{`garbage`, 0, ifMatchNoneKnown},
		{`,`, 0, ifMatchNoneKnown},
	}
	for _, c := range cases {
		v, res := parseIfMatch(c.header)
		if v != c.v || res != c.res {
			t.Errorf("parseIfMatch(%q) = %d, %d; want %d, %d", c.header, v, res, c.v, c.res)
		}
	}
}

// TestNoneMatch: If-None-Match uses the weak comparison, so W/"v1" matches v1.
func TestNoneMatch(t *testing.T) {
	t.Parallel()
	cases := []struct {
		header string
		v      domain.Version
		want   bool
	}{
		{"", 1, false},
		{"*", 1, true},
		{`"v1"`, 1, true},
		{`W/"v1"`, 1, true},
		{`"v2", W/"v1"`, 1, true},
		{` "v3" , "v1" `, 1, true},
		{`"v1"`, 2, false},
		{`W/"v2"`, 1, false},
		{`"v01"`, 1, false},
		{`v1`, 1, false},
		{`"V1"`, 1, false},
		{`garbage`, 1, false},
	}
	for _, c := range cases {
		if got := noneMatch(c.header, c.v); got != c.want {
			t.Errorf("noneMatch(%q, %d) = %v, want %v", c.header, c.v, got, c.want)
		}
	}
}
