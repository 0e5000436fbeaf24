package testkit

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A stop holds a statement sent alone after its result, and a batch before
// it is sent, until released; later arrivals of a StopFirst pass.
func TestStopHoldsAtNamedStatement(t *testing.T) {
	t.Parallel()
	e := New(t)
	ctx := context.Background()
	const probe = "-- name: Probe\nSELECT 1"

	run := func(f func() error) <-chan error {
		done := make(chan error, 1)
		go func() { done <- f() }()
		return done
	}
	held := func(name string, done <-chan error, s *Stop) {
		t.Helper()
		s.WaitArrived(t, 10*time.Second)
		select {
		case err := <-done:
			t.Fatalf("%s went on while held: %v", name, err)
		case <-time.After(50 * time.Millisecond):
		}
		s.Release()
		if err := <-done; err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}

	after := e.Hooks.Stop(After, "Probe")
	held("a statement held after its result", run(func() error {
		_, err := e.Pool.Exec(ctx, probe)
		return err
	}), after)

	before := e.Hooks.StopFirst(Before, "Probe", 1)
	held("a batch held before it is sent", run(func() error {
		b := &pgx.Batch{}
		b.Queue("SELECT 2")
		b.Queue(probe)
		return e.Pool.SendBatch(ctx, b).Close()
	}), before)

	first := e.Hooks.StopFirst(Before, "Probe", 1)
	one := run(func() error { _, err := e.Pool.Exec(ctx, probe); return err })
	first.WaitArrived(t, 10*time.Second)
	if _, err := e.Pool.Exec(ctx, probe); err != nil { // the second arrival passes
		t.Fatal(err)
	}
	first.Release()
	if err := <-one; err != nil {
		t.Fatal(err)
	}
	if _, err := e.Pool.Exec(ctx, probe); err != nil { // a released stop is disarmed
		t.Fatal(err)
	}
}
