package main

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/ordersvc/ordersvc/internal/testkit"
)

// TestMain runs the tests and then fails the package if a goroutine of
// serve (workers, server, pool) outlived its shutdown.
func TestMain(m *testing.M) {
	code := testkit.Run(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines outlived the tests:", err)
			code = 1
		}
	}
	os.Exit(code)
}
