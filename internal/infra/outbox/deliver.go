package outbox

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Deliver sends a claim's events and records each outcome; see deliver. With
// Claim, it is the two halves of DispatchOnce, exported so that tests can
// play a dispatcher that stalls between them.
func (d *Dispatcher) Deliver(ctx context.Context, c Claim) error {
	_, err := d.deliver(ctx, c)
	return err
}

// deliver sends the claim's events, at most Concurrency at a time, records
// each failure as it comes, and marks every event the receiver accepted
// delivered in one statement at the end. It stops starting new POSTs,
// releasing the events not yet tried, when
//   - ctx ends (shutdown): the POSTs in flight are abandoned and released too;
//   - the claim is about to expire: a POST started now could still be
//     running when the reaper gives the event to another dispatcher;
//   - a delivery fails transiently: the one receiver is unwell, and the next
//     poll probes it again instead of spending the batch on it.
//
// An accepted event is marked only when the batch ends: a dispatcher that
// dies in between leaves it claimed, and the reaper gives it back to be
// sent again, as for any delivery whose outcome was not recorded
// (at least once). No POST starts after safeUntil and each ends within
// HTTPTimeout, so the mark goes out before the claim expires.
func (d *Dispatcher) deliver(ctx context.Context, c Claim) (cut bool, err error) {
	finish := context.WithoutCancel(ctx)
	safeUntil := c.start.Add(d.cfg.ClaimTimeout - d.cfg.HTTPTimeout - d.cfg.ClaimTimeout/10)
	var (
		out   outcomes
		wg    sync.WaitGroup
		slots = make(chan struct{}, d.cfg.Concurrency)
		next  = 0
	)
	for ; next < len(c.Events); next++ {
		slots <- struct{}{} // wait for a free slot before deciding to start
		if out.stopped() || ctx.Err() != nil || time.Now().After(safeUntil) {
			<-slots
			break
		}
		ev := c.Events[next]
		wg.Go(func() {
			defer func() { <-slots }()
			d.deliverOne(ctx, finish, c, ev, &out)
		})
	}
	wg.Wait()
	cut = next < len(c.Events) || len(out.abandoned) > 0 || out.failed || len(out.errs) > 0
	errs := append(out.errs, d.markDelivered(finish, c, out.accepted))
	errs = append(errs, d.release(finish, c, append(out.abandoned, c.Events[next:]...)))
	return cut, errors.Join(errs...)
}

// outcomes collects what the deliveries of one batch came to, from their
// goroutines.
type outcomes struct {
	mu        sync.Mutex
	accepted  []uuid.UUID
	abandoned []Delivery // in flight when ctx ended: released untried
	failed    bool       // a transient failure: start nothing more
	errs      []error    // outcomes that could not be recorded
}

// stopped says whether the batch should start no more deliveries.
func (o *outcomes) stopped() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.failed || len(o.errs) > 0
}

func (o *outcomes) add(f func(o *outcomes)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	f(o)
}

// deliverOne sends one event and records its outcome: accepted (marked when
// the batch ends), abandoned (ctx ended while it was in flight) or failed
// (recorded now, on the claim; a failure that cannot be recorded is left
// to the reaper, which gives the event back after the claim timeout).
func (d *Dispatcher) deliverOne(ctx, finish context.Context, c Claim, ev Delivery, out *outcomes) {
	sctx, span := d.startDelivery(ctx, ev)
	res := d.sink.send(sctx, ev)
	defer endDelivery(span, res)
	switch {
	case res.ok:
		out.add(func(o *outcomes) { o.accepted = append(o.accepted, ev.ID) })
	case ctx.Err() != nil:
		out.add(func(o *outcomes) { o.abandoned = append(o.abandoned, ev) })
	default:
		if span != nil {
			finish = trace.ContextWithSpan(finish, span) // the outcome's record is part of the delivery's trace
		}
		err := d.fail(finish, c, ev, res)
		out.add(func(o *outcomes) {
			o.failed = o.failed || !res.permanent
			if err != nil {
				o.errs = append(o.errs, err)
			}
		})
	}
}

// startDelivery starts the span of one delivery attempt, when tracing is
// on. It is the root of a trace of its own: the event was committed by a
// request whose trace ended long before, and linking to it would mean
// keeping that request's trace context in the outbox row (ADR 0012). The
// webhook request carries this span's context as traceparent, so that the
// receiver's trace continues the delivery's.
func (d *Dispatcher) startDelivery(ctx context.Context, ev Delivery) (context.Context, trace.Span) {
	if d.tracer == nil {
		return ctx, nil
	}
	return d.tracer.Start(ctx, "deliver "+ev.Type, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			semconv.MessagingOperationTypeSend,
			semconv.MessagingMessageID(ev.ID.String()),
			attribute.String("outbox.event.type", ev.Type),
			attribute.String("outbox.event.aggregate_id", ev.AggregateID.String()),
			attribute.Int("outbox.event.attempt", ev.Attempts),
		))
}

// endDelivery records the attempt's outcome on its span and ends it.
func endDelivery(span trace.Span, res result) {
	if span == nil {
		return
	}
	if !res.ok {
		span.SetAttributes(attribute.Bool("outbox.delivery.permanent", res.permanent))
		span.SetStatus(codes.Error, res.err)
	}
	span.End()
}
