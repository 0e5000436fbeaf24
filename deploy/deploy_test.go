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

// Every variable docker-compose.yml reads is listed in .env.example, so
// that a knob of the stack (a port, an image, the profile `scale`'s) is
// found where the service's settings are.
func TestComposeVariablesAreInEnvExample(t *testing.T) {
	compose, example := read(t, "../docker-compose.yml"), read(t, "../.env.example")
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)`).FindAllStringSubmatch(compose, -1) {
		name := m[1]
		if seen[name] {
			continue
		}
		seen[name] = true
		if !regexp.MustCompile(`(?m)^#?\s*` + regexp.QuoteMeta(name) + `=`).MatchString(example) {
			t.Errorf("docker-compose.yml reads ${%s} but .env.example has no `# %s=` line", name, name)
		}
	}
	if len(seen) == 0 {
		t.Fatal("found no ${NAME} in docker-compose.yml")
	}
}

// The profile `scale` holds together: HAProxy names every replica service
// and checks /readyz, PgBouncer pools per transaction, the replicas reach
// the database through PgBouncer with an exec mode that sends no named
// prepared statement (ADR 0009), and `api migrate` goes direct.
func TestScaleProfileWiring(t *testing.T) {
	compose := read(t, "../docker-compose.yml")
	haproxy := read(t, "scale/haproxy.cfg")
	pgbouncer := read(t, "scale/pgbouncer.ini")

	replicas := regexp.MustCompile(`(?m)^  (api-\d+):\n    <<: \*api-replica$`).FindAllStringSubmatch(compose, -1)
	if len(replicas) < 2 {
		t.Fatalf("docker-compose.yml: want at least two `api-N:` services from *api-replica, got %d", len(replicas))
	}
	for _, r := range replicas {
		if !regexp.MustCompile(`(?m)^\s+server ` + r[1] + ` ` + r[1] + `:8080$`).MatchString(haproxy) {
			t.Errorf("haproxy.cfg has no `server %s %s:8080` line", r[1], r[1])
		}
	}
	if n := len(regexp.MustCompile(`(?m)^\s+server `).FindAllString(haproxy, -1)); n != len(replicas) {
		t.Errorf("haproxy.cfg has %d servers, docker-compose.yml %d replicas", n, len(replicas))
	}
	for _, want := range []string{`(?m)^\s+balance roundrobin$`, `(?m)^\s+option httpchk GET /readyz$`, `(?m)^\s+default-server check `} {
		if !regexp.MustCompile(want).MatchString(haproxy) {
			t.Errorf("haproxy.cfg does not match %s", want)
		}
	}
	if !regexp.MustCompile(`(?m)^pool_mode = transaction$`).MatchString(pgbouncer) {
		t.Error("pgbouncer.ini: want `pool_mode = transaction`")
	}
	m := regexp.MustCompile(`(?m)^x-api-replica: &api-replica\n(?:  .*\n|    .*\n)*`).FindString(compose)
	if m == "" {
		t.Fatal("docker-compose.yml: no `x-api-replica: &api-replica` block")
	}
	if !regexp.MustCompile(`DATABASE_URL: postgres://\S+@pgbouncer:6432/\S+default_query_exec_mode=(cache_describe|exec)\b`).MatchString(m) {
		t.Error("the replicas' DATABASE_URL must go through pgbouncer:6432 with default_query_exec_mode=cache_describe or exec")
	}
	if !regexp.MustCompile(`MIGRATE_DATABASE_URL: postgres://\S+@postgres:5432/`).MatchString(m) {
		t.Error("the replicas' MIGRATE_DATABASE_URL must go direct to postgres:5432")
	}
}
