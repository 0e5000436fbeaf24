package deploy

import (
	"regexp"
	"strings"
	"testing"
)

// The profile `backup` holds together (ADR 0018): one stanza name wherever
// pgBackRest is told which cluster it serves, the superuser of the stack's
// database as pgBackRest's user, the same PostgreSQL image default as the
// stack (the archiver and a restored cluster run the server's own binaries),
// and a restore cluster that cannot archive into the repository.
func TestBackupProfileHoldsTogether(t *testing.T) {
	override := read(t, "backup/docker-compose.backup.yml")
	conf := read(t, "backup/pgbackrest.conf")
	compose := read(t, "../docker-compose.yml")
	dockerfile := read(t, "local-images/pgbackrest/Dockerfile")

	envStanza := regexp.MustCompile(`(?m)^\s+PGBACKREST_STANZA:\s*(\S+)\s*$`).FindStringSubmatch(override)
	if envStanza == nil {
		t.Fatal("docker-compose.backup.yml: no PGBACKREST_STANZA")
	}
	stanza := envStanza[1]
	if !regexp.MustCompile(`(?m)^\[` + regexp.QuoteMeta(stanza) + `\]\s*$`).MatchString(conf) {
		t.Errorf("pgbackrest.conf has no [%s] section for the stanza the compose file names", stanza)
	}
	archive := regexp.MustCompile(`(?m)archive_command=(.*)$`).FindStringSubmatch(override)
	if archive == nil || !strings.Contains(archive[1], "--stanza="+stanza+" ") || !strings.Contains(archive[1], "archive-push %p") {
		t.Errorf("archive_command must be `pgbackrest --stanza=%s archive-push %%p`, got %q", stanza, archive)
	}

	user := regexp.MustCompile(`(?m)^\s+POSTGRES_USER:\s*(\S+)\s*$`).FindStringSubmatch(compose)
	pgUser := regexp.MustCompile(`(?m)^pg1-user=(\S+)\s*$`).FindStringSubmatch(conf)
	if user == nil || pgUser == nil || user[1] != pgUser[1] {
		t.Errorf("pgbackrest.conf pg1-user %v must be docker-compose.yml's POSTGRES_USER %v", pgUser, user)
	}

	composeDefault := regexp.MustCompile(`\$\{POSTGRES_IMAGE:-([^}]+)\}`).FindStringSubmatch(compose)
	fileDefault := regexp.MustCompile(`(?m)^ARG POSTGRES_IMAGE=(\S+)\s*$`).FindStringSubmatch(dockerfile)
	if composeDefault == nil || fileDefault == nil || composeDefault[1] != fileDefault[1] {
		t.Errorf("the pgBackRest image must build FROM the stack's PostgreSQL image: Dockerfile %v, docker-compose.yml %v", fileDefault, composeDefault)
	}
	buildArg := regexp.MustCompile(`(?m)^\s+POSTGRES_IMAGE:\s*(\S+)\s*$`).FindStringSubmatch(override)
	if buildArg == nil || buildArg[1] != "${POSTGRES_IMAGE:-"+composeDefault[1]+"}" {
		t.Errorf("docker-compose.backup.yml must build from ${POSTGRES_IMAGE:-%s}, got %v", composeDefault[1], buildArg)
	}

	pitr := serviceBlock(t, override, "postgres-pitr")
	if strings.Contains(pitr, "archive_mode") || strings.Contains(pitr, "archive_command") {
		t.Error("postgres-pitr must not set archive_mode or archive_command: they would win over the restore's --archive-mode=off")
	}
	if !regexp.MustCompile(`pgbackrest-repo:/var/lib/pgbackrest:ro`).MatchString(pitr) {
		t.Error("postgres-pitr must mount the repository read-only")
	}
}

// Every variable the override reads is listed in .env.example, like those
// of docker-compose.yml (TestComposeVariablesAreInEnvExample).
func TestBackupVariablesAreInEnvExample(t *testing.T) {
	override, example := read(t, "backup/docker-compose.backup.yml"), read(t, "../.env.example")
	names := regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)`).FindAllStringSubmatch(override, -1)
	if len(names) == 0 {
		t.Fatal("found no ${NAME} in docker-compose.backup.yml")
	}
	for _, m := range names {
		if !regexp.MustCompile(`(?m)^#?\s*` + regexp.QuoteMeta(m[1]) + `=`).MatchString(example) {
			t.Errorf("docker-compose.backup.yml reads ${%s} but .env.example has no `# %s=` line", m[1], m[1])
		}
	}
}

// serviceBlock returns the lines of one service in a compose file: from
// `  NAME:` to the next line indented by two spaces or less.
func serviceBlock(t *testing.T, compose, name string) string {
	t.Helper()
	start := strings.Index(compose, "\n  "+name+":\n")
	if start < 0 {
		t.Fatalf("no service %s", name)
	}
	rest := compose[start+1:]
	lines := strings.SplitAfter(rest, "\n")
	var b strings.Builder
	b.WriteString(lines[0])
	for _, l := range lines[1:] {
		if strings.TrimSpace(l) != "" && !strings.HasPrefix(l, "   ") && !strings.HasPrefix(strings.TrimLeft(l, " "), "#") {
			break
		}
		b.WriteString(l)
	}
	return b.String()
}
