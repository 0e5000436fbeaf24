package main

import (
	"fmt"
	"io"
	"slices"
)

// commandUsage is the usage of each command, printed (exit 0) by
// `api COMMAND --help`, `-h` or `help`: asking for help never runs the
// command, so `api serve --help` does not start serving.
var commandUsage = map[string]string{
	"serve": `usage: api serve

run the HTTP server (HTTP_ADDR, default :8080) and the background workers
(outbox dispatcher, idempotency purge, outbox retention) until SIGTERM or
SIGINT; configuration is read from the environment (see README.md)`,
	"migrate": `usage: api migrate up|down|status

apply every pending migration, roll back the last one, or list them;
connects to MIGRATE_DATABASE_URL (default DATABASE_URL)`,
	"actor": `usage: api actor create --name NAME --role customer|staff [--credit-limit-cents N]

create an actor and print {"actor_id","token"}; the token is shown once`,
	"outbox": outboxUsage + `

dead: list dead outbox events, one JSON object a line
requeue: make one dead event (by id) or all of them deliverable again`,
	"check": `usage: api check

report every stale derived value (e.g. a balance that differs from its
orders), one line each, and exit 1 if any; when everything holds, print one
summary line and exit 0`,
	"seed": `usage: api seed

create demo actors (a staff member, two customers) and demo products, and
print as JSON the actors' tokens and the products it made`,
	"healthcheck": `usage: api healthcheck

exit 0 when the server on HTTP_ADDR's port answers /readyz with 200 (for
images without curl)`,
}

// wantsHelp reports whether the arguments after a command ask for its usage.
func wantsHelp(args []string) bool {
	return slices.ContainsFunc(args, func(a string) bool {
		return a == "-h" || a == "-help" || a == "--help" || a == "help"
	})
}

// printCommandUsage prints the usage of command when it has one.
func printCommandUsage(stdout io.Writer, command string) (bool, error) {
	u, ok := commandUsage[command]
	if !ok {
		return false, nil
	}
	_, err := fmt.Fprintln(stdout, u)
	return true, err
}
