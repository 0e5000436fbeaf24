package main

import (
	"context"
	"io"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(traceIDs{slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})})
}

// traceIDs adds trace_id and span_id to every line logged with a context
// that holds a span (a request's, an outbox delivery's): the request's log
// line, and a failure logged while serving it, lead to its trace, and to the
// very span that was current. With tracing off no context holds a span and
// the lines are unchanged.
type traceIDs struct{ slog.Handler }

func (h traceIDs) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceIDs) WithAttrs(attrs []slog.Attr) slog.Handler {
	return traceIDs{h.Handler.WithAttrs(attrs)}
}

func (h traceIDs) WithGroup(name string) slog.Handler {
	return traceIDs{h.Handler.WithGroup(name)}
}
