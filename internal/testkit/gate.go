package testkit

import (
	"sync"
	"time"
)

// Gate holds goroutines until n of them have arrived, then lets that cohort
// go together; a cohort that stays short is released after a timeout. Naive
// variants call Wait between their read and their write, so that the
// interleaving the test is about happens on every run, however busy the
// machine, instead of depending on a sleep being long enough.
type Gate struct {
	n       int
	timeout time.Duration

	mu      sync.Mutex
	waiting int
	release chan struct{}
}

// NewGate returns a gate for cohorts of n, released after timeout at the latest.
func NewGate(n int, timeout time.Duration) *Gate {
	return &Gate{n: n, timeout: timeout, release: make(chan struct{})}
}

// Wait blocks until the cohort is full or the timeout passes.
func (g *Gate) Wait() {
	g.mu.Lock()
	ch := g.release
	g.waiting++
	if g.waiting >= g.n {
		g.waiting = 0
		g.release = make(chan struct{})
		close(ch)
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(g.timeout):
		g.mu.Lock()
		if g.release == ch { // still the same cohort: release it
			g.waiting = 0
			g.release = make(chan struct{})
			close(ch)
		}
		g.mu.Unlock()
	}
}
