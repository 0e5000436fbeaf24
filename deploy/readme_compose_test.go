package deploy

import (
	"regexp"
	"strings"
	"testing"
)

// TestReadmeComposeCommandsRunOnV1AndV2: a shell block of the READMEs runs
// compose through make (which picks v2 or v1) or through a variable set to
// whichever is installed, never as a bare `docker compose` (v2 only) or
// `docker-compose` (v1 only) command, so every section works with either.
func TestReadmeComposeCommandsRunOnV1AndV2(t *testing.T) {
	t.Parallel()
	bare := regexp.MustCompile(`^\s*(docker compose|docker-compose)\s`)
	for _, path := range []string{"../README.md", "README.md", "../docs/scaling.md", "../docs/template.md", "../docs/events.md"} {
		inShell := false
		for n, line := range strings.Split(read(t, path), "\n") {
			switch {
			case strings.HasPrefix(line, "```sh"), strings.HasPrefix(line, "```bash"), strings.HasPrefix(line, "```shell"):
				inShell = true
			case strings.HasPrefix(line, "```"):
				inShell = false
			case inShell && bare.MatchString(line):
				t.Errorf("%s:%d: %q runs on one compose version only: use make, or C=\"docker compose\"; $C version >/dev/null 2>&1 || C=docker-compose", path, n+1, strings.TrimSpace(line))
			}
		}
	}
}

// TestReadmeFirstCallsLeaveNoFiles: the README's first calls keep the
// responses they read again in a temporary directory ($T), never in the
// working directory, where they would enter the repository and the image's
// build context.
func TestReadmeFirstCallsLeaveNoFiles(t *testing.T) {
	t.Parallel()
	readme := read(t, "../README.md")
	_, section, ok := strings.Cut(readme, "\n## First calls\n")
	if !ok {
		t.Fatal("README.md has no First calls section")
	}
	_, section, _ = strings.Cut(section, "```sh\n")
	section, _, _ = strings.Cut(section, "\n```")
	if !strings.Contains(section, "T=$(mktemp -d)") {
		t.Error("the first calls make no temporary directory (T=$(mktemp -d))")
	}
	target := regexp.MustCompile(`(?:\btee\s+(?:-a\s+)?|\s>>?\s*)([^\s|;&)]+)`)
	writes := 0
	for _, m := range target.FindAllStringSubmatch(section, -1) {
		writes++
		if !strings.HasPrefix(m[1], "$T/") && !strings.HasPrefix(m[1], "/dev/") {
			t.Errorf("the first calls write %s into the working directory: write to $T/ instead", m[1])
		}
	}
	if writes == 0 {
		t.Error("found no file the first calls write: has the block changed shape?")
	}
}
