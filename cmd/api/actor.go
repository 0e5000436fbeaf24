package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
)

func actorCreate(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fl := flag.NewFlagSet("actor create", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	name := fl.String("name", "", "display name")
	role := fl.String("role", "", "customer or staff")
	limit := fl.Int64("credit-limit-cents", 0, "credit limit in cents (customers)")
	if err := fl.Parse(args); err != nil {
		return fmt.Errorf("actor create: %w (usage: --name NAME --role customer|staff [--credit-limit-cents N])", err)
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("actor create: unexpected argument %q", fl.Arg(0))
	}
	c, pool, err := connect(ctx, getenv, "actor")
	if err != nil {
		return err
	}
	defer pool.Close()
	runner := newRunner(pool, newLogger(io.Discard, slog.LevelError), nil, c)
	out, err := app.CreateActor{Transactor: runner}.Handle(ctx, app.CreateActorCommand{Name: *name, Role: *role, CreditLimitCents: *limit})
	if err != nil {
		var de *domain.Error
		if errors.As(err, &de) {
			return fmt.Errorf("actor create: %s", de.Error())
		}
		return err
	}
	return json.NewEncoder(stdout).Encode(map[string]string{"actor_id": out.Actor.ID.String(), "token": out.Token})
}
