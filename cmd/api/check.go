package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/ordersvc/ordersvc/internal/infra"
)

// check runs `api check`: it prints every broken invariant or stale derived
// value that infra.Check finds, one line each, and fails (exit 1) when there
// is any. Nothing printed and exit 0 means that everything held.
func check(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) != 0 {
		return errors.New("usage: api check")
	}
	c, err := loadConfig(getenv, true)
	if err != nil {
		return err
	}
	pool, err := openPool(ctx, c, "check", nil)
	if err != nil {
		return err
	}
	defer pool.Close()
	findings, err := infra.Check(ctx, pool)
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
	return nil
}
