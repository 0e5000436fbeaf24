package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ordersvc/ordersvc/internal/infra/store"
)

// check runs `api check`: it prints every broken invariant or stale derived
// value that store.Check finds, one line each, and fails (exit 1) when there
// is any. When everything holds it prints one line saying what was checked.
func check(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) != 0 {
		return errors.New("usage: api check")
	}
	c, pool, err := connect(ctx, getenv, "check")
	if err != nil {
		return err
	}
	defer pool.Close()
	start := time.Now()
	findings, err := store.Check(ctx, pool, store.CheckOptions{Retention: c.OutboxRetention})
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	for _, f := range findings {
		if _, err := fmt.Fprintln(stdout, f); err != nil {
			return err
		}
	}
	if len(findings) > 0 {
		return fmt.Errorf("check: %d finding(s)", len(findings))
	}
	kinds := store.CheckKinds()
	_, err = fmt.Fprintf(stdout, "ok: all %d checks hold (%s) in %s\n", len(kinds), strings.Join(kinds, ", "),
		time.Since(start).Round(time.Millisecond))
	return err
}
