// Command api runs the order and inventory service and its admin commands.
// See the README for the commands and their configuration.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "api:", err)
		os.Exit(1)
	}
}

const usage = `usage: api <command>

commands:
  serve                         run the HTTP server and background workers
  migrate up|down|status        apply, roll back one, or list migrations
  actor create --name NAME --role customer|staff [--credit-limit-cents N]
                                create an actor and print {"actor_id","token"}
  outbox dead                   list dead outbox events, one JSON object a line
  outbox requeue ID|--all       make dead outbox events deliverable again
  check                         report every stale derived value (e.g. a balance that
                                differs from its orders), one line each; exit 1 if any
  seed                          create demo actors and products, print tokens
  healthcheck                   exit 0 when the local server is ready (for images without curl)

api COMMAND --help prints the usage of one command;
configuration is read from the environment; see README.md`

// run is the whole program: main only wires the process to it, so tests can
// call it with their own arguments, environment and output.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	if wantsHelp(args[1:]) {
		if ok, err := printCommandUsage(stdout, args[0]); ok {
			return err
		}
	}
	switch args[0] {
	case "serve":
		return serve(ctx, getenv, stdout, nil)
	case "migrate":
		return migrate(ctx, args[1:], getenv, stdout)
	case "actor":
		if len(args) < 2 || args[1] != "create" {
			return errors.New("usage: api actor create --name NAME --role customer|staff [--credit-limit-cents N]")
		}
		return actorCreate(ctx, args[2:], getenv, stdout)
	case "outbox":
		return outboxCommand(ctx, args[1:], getenv, stdout)
	case "check":
		return check(ctx, args[1:], getenv, stdout)
	case "seed":
		return seed(ctx, getenv, stdout)
	case "healthcheck":
		return healthcheck(ctx, getenv)
	case "help", "-h", "--help":
		_, err := fmt.Fprintln(stdout, usage)
		return err
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}
