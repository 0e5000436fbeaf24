package infra_test

import (
	"testing"

	"github.com/ordersvc/ordersvc/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }
