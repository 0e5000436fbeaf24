package main

import (
	"strings"
	"testing"
)

// TestEveryCommandHelpPrintsUsage: `api COMMAND --help` (or -h, -help,
// help) succeeds and prints that command's usage, for every command, and
// does nothing else: with no DATABASE_URL, a command that ran would fail,
// and `serve --help` would try to serve.
func TestEveryCommandHelpPrintsUsage(t *testing.T) {
	t.Parallel()
	cases := [][]string{
		{"serve", "--help"}, {"serve", "-h"}, {"migrate", "--help"}, {"migrate", "up", "--help"},
		{"actor", "--help"}, {"actor", "create", "--help"}, {"actor", "create", "-h"},
		{"outbox", "--help"}, {"outbox", "requeue", "--help"}, {"check", "--help"}, {"check", "help"},
		{"seed", "--help"}, {"seed", "-help"}, {"healthcheck", "--help"},
	}
	for _, args := range cases {
		out, err := runCmd(t, env(), args...)
		if err != nil {
			t.Errorf("api %s: %v, want exit 0", strings.Join(args, " "), err)
			continue
		}
		if !strings.HasPrefix(out, "usage: api "+args[0]) {
			t.Errorf("api %s printed %q, want its usage", strings.Join(args, " "), out)
		}
	}
	for command := range commandUsage {
		if out, err := runCmd(t, env(), command, "--help"); err != nil || out == "" {
			t.Errorf("api %s --help: %v %q", command, err, out)
		}
	}
	// The top-level usage names every command that has its own.
	for command := range commandUsage {
		if !strings.Contains(usage, "\n  "+command) {
			t.Errorf("the usage does not list %s", command)
		}
	}
}
