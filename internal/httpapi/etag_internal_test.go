package httpapi

import (
	"slices"
	"strings"
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

// TestParseIfMatch: a list of entity tags, over one or more header lines,
// names the versions of its strong tags; weak tags and tags that name no
// version never match; a missing header and "*" need a precondition (428);
// anything that is not an entity tag is malformed (400)
// (EXT.CONCURRENCY.VERSION.001, RFC 9110 §13.1.1).
//
// Patterns and rule ids: docs/patterns.md.
func TestParseIfMatch(t *testing.T) {
	t.Parallel()
	cases := []struct {
		lines []string
		res   ifMatchResult
		vs    []domain.Version
		bad   string
	}{
		{nil, ifMatchMissing, nil, ""},
		{[]string{""}, ifMatchMissing, nil, ""},
		{[]string{"   "}, ifMatchMissing, nil, ""},
		{[]string{" , ,"}, ifMatchMissing, nil, ""},
		{[]string{"*"}, ifMatchAny, nil, ""},
		{[]string{" * "}, ifMatchAny, nil, ""},
		{[]string{`"v1"`}, ifMatchTags, []domain.Version{1}, ""},
		{[]string{` "v42" `}, ifMatchTags, []domain.Version{42}, ""},
		{[]string{`"v9223372036854775807"`}, ifMatchTags, []domain.Version{9223372036854775807}, ""},
		{[]string{`"v1", "v2"`}, ifMatchTags, []domain.Version{1, 2}, ""},
		{[]string{`"v1","v2"`}, ifMatchTags, []domain.Version{1, 2}, ""},
		{[]string{`"v2", "v1", "v2"`}, ifMatchTags, []domain.Version{2, 1}, ""},
		{[]string{`"v1"`, `"v3"`}, ifMatchTags, []domain.Version{1, 3}, ""},
		{[]string{`W/"v3", "v2"`}, ifMatchTags, []domain.Version{2}, ""},
		{[]string{`"x", "v5"`}, ifMatchTags, []domain.Version{5}, ""},
		{[]string{`"a,b", "v5"`}, ifMatchTags, []domain.Version{5}, ""},
		{[]string{`"v1", , "v2",`}, ifMatchTags, []domain.Version{1, 2}, ""},

		{[]string{`W/"v1"`}, ifMatchTags, nil, ""},
		{[]string{`"v0"`}, ifMatchTags, nil, ""},
		{[]string{`"v-1"`}, ifMatchTags, nil, ""},
		{[]string{`"v+1"`}, ifMatchTags, nil, ""},
		{[]string{`"v01"`}, ifMatchTags, nil, ""},
		{[]string{`"v1.0"`}, ifMatchTags, nil, ""},
		{[]string{`"v"`}, ifMatchTags, nil, ""},
		{[]string{`""`}, ifMatchTags, nil, ""},
		{[]string{`"V1"`}, ifMatchTags, nil, ""},
		{[]string{`"p1"`}, ifMatchTags, nil, ""},
		{[]string{`"v9223372036854775808"`}, ifMatchTags, nil, ""},

		{[]string{`v1`}, ifMatchMalformed, nil, "v1"},
		{[]string{`"v1", v2`}, ifMatchMalformed, nil, "v2"},
		{[]string{`w/"v1"`}, ifMatchMalformed, nil, `w/"v1"`},
		{[]string{`W/v1`}, ifMatchMalformed, nil, "W/v1"},
		{[]string{`"v1`}, ifMatchMalformed, nil, `"v1`},
		{[]string{`"v1"x`}, ifMatchMalformed, nil, `"v1"x`},
		{[]string{`"v 1"`}, ifMatchMalformed, nil, `"v 1"`},
		{[]string{`"v1", *`}, ifMatchMalformed, nil, "*"},
		{[]string{`*`, `"v1"`}, ifMatchMalformed, nil, "*"},
		{[]string{`garbage`}, ifMatchMalformed, nil, "garbage"},
		{[]string{"\"v1\x00\""}, ifMatchMalformed, nil, "\"v1\x00\""},
		{[]string{"\"v1\"\v"}, ifMatchMalformed, nil, "\"v1\"\v"},
		{[]string{"\f\"v1\""}, ifMatchMalformed, nil, "\f\"v1\""},
	}
	for _, c := range cases {
		m := parseIfMatch(c.lines)
		if m.result != c.res || !slices.Equal(m.versions, c.vs) || m.bad != c.bad {
			t.Errorf("parseIfMatch(%q) = %d %v %q; want %d %v %q", c.lines, m.result, m.versions, m.bad, c.res, c.vs, c.bad)
		}
	}
}

// TestIfMatchProblems: each refused form has its status, code and a detail
// that says which case it was.
func TestIfMatchProblems(t *testing.T) {
	t.Parallel()
	cases := []struct {
		lines    []string
		status   int
		code     domain.Code
		inDetail string
	}{
		{nil, 428, domain.CodePreconditionRequired, "missing"},
		{[]string{"*"}, 428, domain.CodePreconditionRequired, "If-Match: * names no version"},
		{[]string{"v3"}, 400, domain.CodeMalformed, `If-Match: "v3"`},
		{[]string{`W/v12`}, 400, domain.CodeMalformed, `If-Match: "v12"`},
		{[]string{"\"\x01"}, 400, domain.CodeMalformed, `If-Match: "v1"`},
		{[]string{`W/"v3"`}, 409, domain.CodeVersionConflict, "weak"},
	}
	for _, c := range cases {
		p := asProblem(parseIfMatch(c.lines).err())
		if p == nil || p.Status != c.status || p.Code != c.code || !strings.Contains(p.Detail, c.inDetail) {
			t.Errorf("If-Match %q: problem %+v, want %d %s with %q", c.lines, p, c.status, c.code, c.inDetail)
		}
	}
	if p := asProblem(parseIfMatch([]string{`W/"v1", "v2"`}).err()); p != nil {
		t.Errorf("a list with a strong version tag is left to the use case, got %+v", p)
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
		{`"v2", v1`, 1, false},
		{`"a,b", "v1"`, 1, true},
		{"\t\"v1\"\t", 1, true},
		{"\"v1\"\v", 1, false}, // only spaces and tabs are optional whitespace
		{"\f*", 1, false},
	}
	for _, c := range cases {
		if got := noneMatch([]string{c.header}, c.v); got != c.want {
			t.Errorf("noneMatch(%q, %d) = %v, want %v", c.header, c.v, got, c.want)
		}
	}
}
