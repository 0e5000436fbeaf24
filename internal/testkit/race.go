package testkit

import (
	"fmt"
	"sync"
	"testing"
)

// Meet is where a race test's racers meet: a stop before or after a named
// statement, released once N racers are there, held at the stop or waiting
// for a lock behind the one held (Env.Interleave). Guarded and naive runs
// both go through it, so the interleaving is forced in both.
type Meet struct {
	Where     Where
	Statement string
	N         int
}

// Arm arms the meeting on e; call done after the race.
func (m Meet) Arm(t *testing.T, e *Env) (done func()) {
	il := e.Interleave(m.Where, m.Statement, m.N)
	return func() {
		t.Helper()
		held, waiting := il.Wait(t)
		t.Logf("interleaving forced %s %s: %d racers held there, %d waiting for a lock", m.Where, m.Statement, held, waiting)
	}
}

// RaceTest runs an invariant check twice: against the real service, where it
// must hold, and against a deliberately naive variant of the mechanism, where
// it must break. The second run is the proof that the test can fail (the
// seed's "race reproduced, then shown fixed"). Each run forces its
// interleaving at its meeting point.
func RaceTest(t *testing.T, check func(t *testing.T, e *Env, m Meet) []string, guarded Meet, naive func(t *testing.T) (*Env, Meet)) {
	bothRuns(t, func(t *testing.T) []string {
		e := New(t)
		e.CheckAtEnd()
		return check(t, e, guarded)
	}, func(t *testing.T) []string {
		e, m := naive(t)
		return check(t, e, m)
	})
}

// InvariantTest is RaceTest for a check that forces its own interleavings.
func InvariantTest(t *testing.T, check func(t *testing.T, e *Env) []string, naive func(t *testing.T) *Env) {
	bothRuns(t, func(t *testing.T) []string {
		e := New(t)
		e.CheckAtEnd()
		return check(t, e)
	}, func(t *testing.T) []string {
		return check(t, naive(t))
	})
}

// bothRuns runs guarded, which must find nothing broken, and naive, which
// must find something, in parallel.
func bothRuns(t *testing.T, guarded, naive func(t *testing.T) []string) {
	t.Run("guarded", func(t *testing.T) {
		t.Parallel()
		for _, b := range guarded(t) {
			t.Error(b)
		}
	})
	t.Run("naive variant is caught", func(t *testing.T) {
		t.Parallel()
		broken := naive(t)
		if len(broken) == 0 {
			t.Fatal("the naive variant kept the invariant: this test cannot catch the race")
		}
		t.Logf("naive variant broke the invariant, as it must: %v", broken)
	})
}

// Findings collects unexpected outcomes from many goroutines. In a naive run
// they are part of the breakage; in a guarded run they fail the test.
type Findings struct {
	mu   sync.Mutex
	list []string
}

// Add records one finding.
func (f *Findings) Add(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.list = append(f.list, fmt.Sprintf(format, args...))
}

// List returns the findings so far.
func (f *Findings) List() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.list...)
}

// Race runs fn(i) for i in [0, n) on n goroutines released together by one
// start signal, and waits for all of them.
func Race(n int, fn func(i int)) {
	start := make(chan struct{})
	done := make(chan struct{}, n)
	for i := 0; i < n; i++ {
		go func() {
			defer func() { done <- struct{}{} }()
			<-start
			fn(i)
		}()
	}
	close(start)
	for i := 0; i < n; i++ {
		<-done
	}
}
