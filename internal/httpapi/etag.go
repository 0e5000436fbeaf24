package httpapi

import (
	"strconv"
	"strings"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// ETags are strong and derived from the aggregate's persistence version
// (EXT.CONCURRENCY.VERSION.001): "v7" is version 7. No other field of a
// response carries the version.

// etag renders the strong entity tag of version v.
func etag(v domain.Version) string {
	return `"v` + strconv.FormatInt(int64(v), 10) + `"`
}

// ifMatchResult is what an If-Match header asks for.
type ifMatchResult int

const (
	ifMatchMissing   ifMatchResult = iota // absent or "*": 428
	ifMatchNoneKnown                      // only weak, malformed or unknown tags: 409
	ifMatchVersion                        // a strong tag naming a version
)

// parseIfMatch reads an If-Match header. A write needs a strong tag that names
// a version; "*" is not enough, because it would skip the very check that the
// precondition exists for. Of a list, the first strong version tag counts.
func parseIfMatch(h string) (domain.Version, ifMatchResult) {
	h = strings.TrimSpace(h)
	if h == "" || h == "*" {
		return 0, ifMatchMissing
	}
	for _, tag := range splitTags(h) {
		if v, ok := parseStrongTag(tag); ok {
			return v, ifMatchVersion
		}
	}
	return 0, ifMatchNoneKnown
}

// parseStrongTag accepts exactly `"v<positive integer>"` as etag renders it.
// Strong comparison is character by character (RFC 9110), so `"v01"` is not
// `"v1"`: a tag that etag would not have produced names no version.
func parseStrongTag(tag string) (domain.Version, bool) {
	if len(tag) < 4 || tag[0] != '"' || tag[1] != 'v' || tag[len(tag)-1] != '"' {
		return 0, false
	}
	n, err := strconv.ParseInt(tag[2:len(tag)-1], 10, 64)
	if err != nil || n < 1 || etag(domain.Version(n)) != tag {
		return 0, false
	}
	return domain.Version(n), true
}

// noneMatch reports whether an If-None-Match header matches version v, using
// the weak comparison that RFC 9110 prescribes for If-None-Match.
func noneMatch(h string, v domain.Version) bool {
	h = strings.TrimSpace(h)
	if h == "" {
		return false
	}
	if h == "*" {
		return true
	}
	want := etag(v)
	for _, tag := range splitTags(h) {
		if strings.TrimPrefix(tag, "W/") == want {
			return true
		}
	}
	return false
}

func splitTags(h string) []string {
	parts := strings.Split(h, ",")
	out := parts[:0]
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
