package main

import (
	"os"
	"regexp"
	"testing"
)

// Every setting the service reads is listed in .env.example, handed to the
// api container by docker-compose.yml, and documented in the README's
// configuration table, so that a new setting cannot be missed by someone
// configuring the service through any of the three.
func TestEnvExampleListsEverySetting(t *testing.T) {
	files := []struct {
		path, pattern, how string
	}{
		{"../../.env.example", `(?m)^#?\s*%s=`, "a `NAME=default` line (commented out unless it must be set)"},
		{"../../docker-compose.yml", `(?m)^\s+%s:`, "an entry `NAME: ${NAME:-}` under the api's environment"},
		{"../../README.md", "(?m)^\\|.*`%s`", "a row of the configuration table"},
	}
	for _, f := range files {
		b, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range settings {
			if !regexp.MustCompile(regexpf(f.pattern, s.name)).Match(b) {
				t.Errorf("%s does not list %s: add %s", f.path, s.name, f.how)
			}
		}
	}
}

func regexpf(pattern, name string) string {
	return regexp.MustCompile(`%s`).ReplaceAllLiteralString(pattern, regexp.QuoteMeta(name))
}
