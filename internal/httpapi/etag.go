package httpapi

import (
	"slices"
	"strconv"
	"strings"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
)

// ETags are strong and derived from the aggregate's persistence version
// (EXT.CONCURRENCY.VERSION.001): "v7" is version 7. No other field of a
// response carries the version.
// Patterns and rule ids: docs/patterns.md.

// etag renders the strong entity tag of version v.
func etag(v domain.Version) string {
	return `"v` + strconv.FormatInt(int64(v), 10) + `"`
}

// ifMatchResult is what an If-Match header asks for.
type ifMatchResult int

const (
	ifMatchMissing   ifMatchResult = iota // absent or blank: 428
	ifMatchAny                            // "*": 428, it names no version
	ifMatchMalformed                      // holds something that is not an entity tag: 400
	ifMatchTags                           // a list of entity tags: the write applies if a strong one is current
)

// ifMatch is a parsed If-Match header.
type ifMatch struct {
	result ifMatchResult
	// versions are the versions that the list's strong tags name, in order,
	// each once. Weak tags and tags that name no version never match, so a
	// list of only those has none and can only be a conflict.
	versions []domain.Version
	// bad is the first element that is not an entity tag (ifMatchMalformed).
	bad string
}

// parseIfMatch reads the If-Match header lines of a write (RFC 9110
// §13.1.1): "*" or a comma-separated list of entity tags, over one or more
// lines. A write needs a strong tag that names a version; "*" is not enough,
// because it would skip the very check that the precondition exists for.
func parseIfMatch(lines []string) ifMatch {
	h := trimOWS(strings.Join(lines, ","))
	if strings.Trim(h, ", \t") == "" {
		return ifMatch{result: ifMatchMissing}
	}
	if h == "*" {
		return ifMatch{result: ifMatchAny}
	}
	tags, bad, ok := entityTags(h)
	if !ok {
		return ifMatch{result: ifMatchMalformed, bad: bad}
	}
	m := ifMatch{result: ifMatchTags}
	for _, t := range tags {
		if t.weak {
			continue
		}
		if v, ok := parseStrongTag(t.opaque); ok && !slices.Contains(m.versions, v) {
			m.versions = append(m.versions, v)
		}
	}
	return m
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

// noneMatch reports whether If-None-Match header lines match version v,
// using the weak comparison that RFC 9110 prescribes for If-None-Match. A
// value that is not "*" nor a list of entity tags matches nothing, so the
// GET answers in full (RFC 9110 §13.1.2 lets a server ignore a malformed
// precondition on a safe method).
func noneMatch(lines []string, v domain.Version) bool {
	h := trimOWS(strings.Join(lines, ","))
	if h == "" {
		return false
	}
	if h == "*" {
		return true
	}
	tags, _, ok := entityTags(h)
	if !ok {
		return false
	}
	want := etag(v)
	for _, t := range tags {
		if t.opaque == want {
			return true
		}
	}
	return false
}

// seenVersion is the newest version that If-None-Match header lines name,
// weak tags included (the comparison is weak), as app.Seen: the caller
// holds that version, so an answer older than it would show the past. A
// value that names none (absent, "*", malformed) is zero.
func seenVersion(lines []string) app.Seen {
	tags, _, ok := entityTags(trimOWS(strings.Join(lines, ",")))
	if !ok {
		return 0
	}
	var seen app.Seen
	for _, t := range tags {
		if v, ok := parseStrongTag(t.opaque); ok && app.Seen(v) > seen {
			seen = app.Seen(v)
		}
	}
	return seen
}

// entityTag is one element of an If-Match or If-None-Match list.
type entityTag struct {
	weak   bool
	opaque string // with its double quotes
}

// entityTags splits a comma-separated list of entity tags (RFC 9110 §8.8.3:
// entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE, where etagc excludes the
// double quote, spaces and controls but includes the comma). Empty list
// elements are skipped, as RFC 9110 §5.6.1 asks. When an element is not an
// entity tag, ok is false and bad is that element, cut at the next comma.
func entityTags(h string) (tags []entityTag, bad string, ok bool) {
	for i := skip(h, 0, " \t,"); i < len(h); i = skip(h, i, " \t,") {
		t, next, ok := scanTag(h, i)
		if !ok {
			return nil, element(h, i), false
		}
		tags = append(tags, t)
		i = next
	}
	return tags, "", true
}

// scanTag reads the entity tag of the list element that starts at h[i:],
// and returns where the element ends (its comma, or the end of h); ok is
// false when the element is not one entity tag.
func scanTag(h string, i int) (t entityTag, end int, ok bool) {
	if strings.HasPrefix(h[i:], "W/") {
		t.weak = true
		i += 2
	}
	if i == len(h) || h[i] != '"' {
		return t, i, false
	}
	j := i + 1
	for j < len(h) && isETagc(h[j]) {
		j++
	}
	if j == len(h) || h[j] != '"' {
		return t, j, false
	}
	t.opaque = h[i : j+1]
	end = skip(h, j+1, " \t")
	return t, end, end == len(h) || h[end] == ','
}

// skip returns the index of the first byte of h from i on that is not in
// set.
func skip(h string, i int, set string) int {
	for i < len(h) && strings.IndexByte(set, h[i]) >= 0 {
		i++
	}
	return i
}

// isETagc is etagc: %x21 / %x23-7E / obs-text.
func isETagc(c byte) bool { return c == 0x21 || (c >= 0x23 && c != 0x7f) }

// element is the list element that starts at start, up to the next comma.
func element(h string, start int) string {
	e := h[start:]
	if k := strings.IndexByte(e, ','); k >= 0 {
		e = e[:k]
	}
	return trimOWS(e)
}

// trimOWS strips optional whitespace (RFC 9110 §5.6.3: spaces and
// horizontal tabs) and nothing else: a vertical tab or form feed is a
// control character, not a separator, so a value holding one is no list.
func trimOWS(s string) string { return strings.Trim(s, " \t") }

// quotedForm is what the caller probably meant by a value that is not an
// entity tag: v3 is "v3". A value with nothing usable in it gets an example.
func quotedForm(bad string) string {
	core := strings.Trim(strings.TrimPrefix(bad, "W/"), `"`)
	if core == "" || len(core) > 32 {
		return `"v1"`
	}
	for i := 0; i < len(core); i++ {
		c := core[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return `"v1"`
		}
	}
	return `"` + core + `"`
}

// err is the refusal of a precondition that cannot let the write go on, or
// nil when the use case decides (it compares the versions with the current
// one under its guard).
func (m ifMatch) err() error {
	switch m.result {
	case ifMatchMissing:
		return domain.Errorf(domain.CodePreconditionRequired, "the If-Match header is missing: this write requires it, with the resource's current ETag")
	case ifMatchAny:
		return domain.Errorf(domain.CodePreconditionRequired, `If-Match: * names no version: this write requires the resource's current ETag, e.g. If-Match: "v1"`)
	case ifMatchMalformed:
		return domain.Errorf(domain.CodeMalformed, "If-Match holds no entity tag; an ETag is sent with its double quotes: If-Match: %s", quotedForm(m.bad))
	}
	if len(m.versions) == 0 {
		// Weak, stale-format or unknown tags: none can be current.
		return domain.Errorf(domain.CodeVersionConflict, "If-Match names no current version (weak tags never match a write); fetch the resource and retry with its ETag")
	}
	return nil
}
