package store_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/ordersvc/ordersvc/internal/testkit"
)

// TestMain runs the tests and then fails the package if any goroutine that
// a dispatcher, purger, pool or HTTP client started has outlived them.
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
