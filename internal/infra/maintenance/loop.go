// Package maintenance holds the background services' shape (Service,
// Loop, Start) and the sweeps that keep tables bounded: the idempotency
// purge (Purger) and the outbox retention (OutboxRetention). The outbox
// dispatcher (internal/infra/outbox) runs in the same loop. Every
// transaction here goes through postgres.Runner, like the use cases'
// (ADR 0024).
package maintenance

import (
	"context"
	"sync"
	"time"
)

// Service is a background worker of the process: Run works until ctx ends
// and returns once nothing it started is left in flight (the outbox
// dispatcher has released its claim, a sweep's batch has committed or
// rolled back).
type Service interface {
	Run(ctx context.Context)
}

// Start runs each service in a goroutine of its own and returns a channel
// that is closed once every one of them has returned.
func Start(ctx context.Context, services ...Service) <-chan struct{} {
	var wg sync.WaitGroup
	for _, s := range services {
		wg.Go(func() { s.Run(ctx) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done
}

// Loop is the loop every Service runs: round at once, then again after the
// pause that round returns (zero: at once), until ctx ends. A round in
// progress is not cut by the loop; it sees ctx and stops at its own safe
// point.
func Loop(ctx context.Context, round func(ctx context.Context) (pause time.Duration)) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		timer.Reset(round(ctx))
	}
}
