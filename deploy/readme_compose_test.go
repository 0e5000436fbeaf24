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
