package testkit

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Interleaving is a stop that releases itself once the racers have met.
type Interleaving struct {
	stop *Stop
	done chan struct{}

	// Figures at the release.
	Held, Waiting int
	err           error
}

// Interleave arms a stop where (before or after) statement and releases it
// once n racers are there: either held at the stop or waiting for a lock in
// this test's database (pg_stat_activity, wait_event_type Lock). In a
// guarded run the first transaction to lock the contended row is held with
// its lock, so the others queue on it; in a naive run, with no lock, they all
// reach the stop and go on together. Either way the interleaving the test is
// about happens on every run, however busy the machine. The watcher polls on
// a connection of its own, outside the service's pool. Call Wait after the
// race: it fails the test if the racers never met.
func (e *Env) Interleave(where Where, statement string, n int) *Interleaving {
	e.T.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.URL)
	if err != nil {
		e.T.Fatalf("interleave: connect: %v", err)
	}
	il := &Interleaving{stop: e.Hooks.Stop(where, statement), done: make(chan struct{})}
	go func() {
		defer close(il.done)
		defer conn.Close(context.WithoutCancel(ctx))
		defer il.stop.Release()
		il.watch(ctx, conn, n)
	}()
	return il
}

// watch polls until n racers are at the stop, held or waiting for a lock,
// and records the figures; after 30 s it gives up with an error.
func (il *Interleaving) watch(ctx context.Context, conn *pgx.Conn, n int) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		held := il.stop.Held()
		waiting := 0
		if held > 0 {
			var err error
			if waiting, err = lockWaiters(ctx, conn); err != nil {
				il.err = err
				return
			}
		}
		if held > 0 && held+waiting >= n {
			il.Held, il.Waiting = held, waiting
			return
		}
		if time.Now().After(deadline) {
			il.Held, il.Waiting = held, waiting
			il.err = fmt.Errorf("the racers never met at the stop %s: %d held, %d waiting for a lock, want %d together", il.stop, held, waiting, n)
			return
		}
		select {
		case <-il.stop.changed:
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// lockWaiters is how many sessions of the current database wait for a lock.
func lockWaiters(ctx context.Context, conn *pgx.Conn) (int, error) {
	var waiting int
	err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
	if err != nil {
		return 0, fmt.Errorf("read pg_stat_activity: %w", err)
	}
	return waiting, nil
}

// Arrived is closed when the first racer is held at the stop.
func (il *Interleaving) Arrived() <-chan struct{} { return il.stop.Arrived() }

// Wait waits for the release and fails the test if the interleaving was not
// reached. It returns how many racers were held at the stop and how many were
// waiting for a lock when it released them.
func (il *Interleaving) Wait(t interface {
	Helper()
	Errorf(string, ...any)
}) (held, waiting int) {
	t.Helper()
	<-il.done
	if il.err != nil {
		t.Errorf("interleaving not forced: %v", il.err)
	}
	return il.Held, il.Waiting
}
