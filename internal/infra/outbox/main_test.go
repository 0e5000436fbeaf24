package outbox_test

import (
	"testing"

	"github.com/ordersvc/ordersvc/internal/testkit"
)

// TestMain runs the tests and then fails the package if any goroutine that
// a dispatcher, purger, pool or HTTP client started has outlived them.
func TestMain(m *testing.M) { testkit.Main(m) }
