// Package deploy holds the container build and smoke-test scripts; its tests
// keep the Dockerfile and docker-compose.yml in step with go.mod.
package deploy

import (
	"os"
	"regexp"
	"testing"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// goModVersion returns go.mod's `go` directive, e.g. "1.26.8".
func goModVersion(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^go\s+(\S+)\s*$`).FindStringSubmatch(read(t, "../go.mod"))
	if m == nil {
		t.Fatal("../go.mod has no go directive")
	}
	return m[1]
}

// The default build image must carry exactly the Go that go.mod asks for: the
// build runs with GOTOOLCHAIN=local, so an older image fails and a newer one
// builds with a toolchain nobody tested.
func TestDockerfileGoImageMatchesGoMod(t *testing.T) {
	want := goModVersion(t)
	m := regexp.MustCompile(`(?m)^ARG\s+GO_IMAGE=golang:(\d+\.\d+(?:\.\d+)?)\S*\s*$`).FindStringSubmatch(read(t, "../Dockerfile"))
	if m == nil {
		t.Fatal("../Dockerfile: no `ARG GO_IMAGE=golang:<version>...` line")
	}
	if m[1] != want {
		t.Errorf("Dockerfile GO_IMAGE has Go %s, go.mod says go %s", m[1], want)
	}
}

// docker-compose.yml repeats the default as ${GO_IMAGE:-...}; keep it equal.
func TestComposeGoImageMatchesGoMod(t *testing.T) {
	want := goModVersion(t)
	m := regexp.MustCompile(`\$\{GO_IMAGE:-golang:(\d+\.\d+(?:\.\d+)?)[^}]*\}`).FindStringSubmatch(read(t, "../docker-compose.yml"))
	if m == nil {
		t.Fatal("../docker-compose.yml: no `${GO_IMAGE:-golang:<version>...}` default")
	}
	if m[1] != want {
		t.Errorf("docker-compose.yml GO_IMAGE default has Go %s, go.mod says go %s", m[1], want)
	}
}
