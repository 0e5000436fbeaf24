package testkit

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Main is the TestMain of every package that uses the kit:
//
//	func TestMain(m *testing.M) { testkit.Main(m) }
//
// It raises the default number of parallel tests (see parallelism), runs
// the tests, stops what the kit started (PgBouncer, the standby, the
// container), also when tests failed, and then fails the package if a
// goroutine outlived the tests (goleak): a worker, pool, server or client
// that a test started and did not stop.
func Main(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	loadDotEnv()
	if err := parallelism(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	code := m.Run()
	removeBinaries()
	stopPgBouncer()
	stopStandby()
	if container != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = container.Terminate(ctx)
		cancel()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines outlived the tests:", err)
			code = 1
		}
	}
	return code
}

// DefaultParallel is how many tests of a package run at once, per CPU, when
// neither -parallel nor TEST_PARALLEL says otherwise. Go's default is one per
// CPU, made for tests that compute; these wait, on PostgreSQL, on gates that
// force an interleaving, on lock timeouts that prove a naive variant wrong,
// on child processes, and a CPU would sit idle through most of each. Every
// test has a database of its own (DB), so running more of them at once
// changes no outcome, only how long the package takes.
const DefaultParallel = 2

// parallelism sets -test.parallel to TEST_PARALLEL, or to DefaultParallel
// per CPU, unless the command line set it or the run fuzzes.
func parallelism() error {
	if !flag.Parsed() {
		flag.Parse()
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	// Fuzzing reads -parallel as its number of worker processes, which
	// compute: one per CPU, Go's default, is right for them.
	fuzzing := flag.Lookup("test.fuzz") != nil && flag.Lookup("test.fuzz").Value.String() != ""
	if set || fuzzing || flag.Lookup("test.parallel") == nil {
		return nil
	}
	n := DefaultParallel * runtime.GOMAXPROCS(0)
	if v := os.Getenv("TEST_PARALLEL"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 {
			return fmt.Errorf("TEST_PARALLEL=%q: want a positive number of tests run at once", v)
		}
		n = p
	}
	return flag.Set("test.parallel", strconv.Itoa(n))
}
