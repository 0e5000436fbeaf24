package postgres

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// dbTracer records one OpenTelemetry span per database round trip: a
// statement sent on its own, or a batch (the transaction pipe sends BEGIN,
// the guards, the token check and the use case's statements together, and
// the trace shows that as the one exchange it is). A span is named after its
// statements' sqlc names ("StockLockRows"; "begin + GuardsSet +
// ActorLockForOrder" for a batch), which name the SQL in db/queries; the
// SQL text and the arguments are not recorded.
//
// Spans are made only under a span that is recording: the statements of a
// request or of an outbox delivery. The background workers' polling (the
// outbox claim every OUTBOX_POLL_INTERVAL, the purges) would otherwise be a
// stream of one-span traces that says nothing. The prepares of pgx's
// statement cache, once per connection and statement, fall inside the span
// of the statement or batch that needed them.
type dbTracer struct {
	tracer trace.Tracer
	attrs  []attribute.KeyValue
}

var (
	_ pgx.QueryTracer = (*dbTracer)(nil)
	_ pgx.BatchTracer = (*dbTracer)(nil)
)

func newDBTracer(tp trace.TracerProvider, cfg *pgxpool.Config) *dbTracer {
	return &dbTracer{
		tracer: tp.Tracer(TracerName),
		attrs: []attribute.KeyValue{
			semconv.DBSystemNamePostgreSQL,
			semconv.DBNamespace(cfg.ConnConfig.Database),
			semconv.ServerAddress(cfg.ConnConfig.Host),
			semconv.ServerPort(int(cfg.ConnConfig.Port)),
		},
	}
}

// TracerName is the instrumentation scope of the service's own spans.
const TracerName = "github.com/ordersvc/ordersvc/internal/infra"

// dbSpan is the span of one round trip, kept in the context that pgx hands
// back at its end: a round trip this tracer made no span for has none, so
// its end never ends a span it did not start.
type dbSpan struct {
	span   trace.Span
	failed bool // the first failure recorded stands
}

type dbSpanKey struct{}

func (t *dbTracer) start(ctx context.Context, name string, attrs ...attribute.KeyValue) context.Context {
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(t.attrs...), trace.WithAttributes(attrs...))
	return context.WithValue(ctx, dbSpanKey{}, &dbSpan{span: span})
}

func spanOf(ctx context.Context) *dbSpan {
	s, _ := ctx.Value(dbSpanKey{}).(*dbSpan)
	return s
}

func (t *dbTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx
	}
	name := StatementName(data.SQL)
	return t.start(ctx, name, semconv.DBQuerySummary(name))
}

func (t *dbTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	if s := spanOf(ctx); s != nil {
		s.fail("", data.Err)
		s.span.End()
	}
}

func (t *dbTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx
	}
	qs := data.Batch.QueuedQueries
	names := make([]string, len(qs))
	for i, q := range qs {
		names[i] = StatementName(q.SQL)
	}
	summary := strings.Join(names, " + ")
	return t.start(ctx, summary, semconv.DBQuerySummary(summary), semconv.DBOperationBatchSize(len(qs)))
}

// TraceBatchQuery sees each statement's result as the caller reads it; the
// first failure is the batch's (the server skips the rest).
func (t *dbTracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	if s := spanOf(ctx); s != nil && data.Err != nil {
		s.fail(StatementName(data.SQL), data.Err)
	}
}

func (t *dbTracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	if s := spanOf(ctx); s != nil {
		s.fail("", data.Err)
		s.span.End()
	}
}

// fail marks the span failed with the error's SQLSTATE and its error.type,
// naming the statement of a batch that failed. No rows is an outcome, not a
// failure.
func (s *dbSpan) fail(statement string, err error) {
	if err == nil || s.failed || errors.Is(err, pgx.ErrNoRows) {
		return
	}
	s.failed = true
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		s.span.SetAttributes(semconv.DBResponseStatusCode(pgErr.Code))
	}
	s.span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
	desc := err.Error()
	if statement != "" {
		desc = statement + ": " + desc
	}
	s.span.SetStatus(codes.Error, desc)
}

// errorType is a failed round trip's error.type, a value of low cardinality
// that dashboards group by: the SQLSTATE when the server answered (as
// OpenTelemetry's database conventions say, the same as
// db.response.status_code), "timeout" when the caller's deadline ran out,
// "canceled" when the caller gave up, and "_OTHER" for the rest (a
// connection lost, for one).
func errorType(err error) string {
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr):
		return pgErr.Code
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return semconv.ErrorTypeOther.Value.AsString()
}

// statementName is the sqlc name of a statement (its "-- name: X" line), or
// the first word of one without, in lower case ("begin", "commit").
func StatementName(sql string) string {
	s := strings.TrimSpace(sql)
	if rest, ok := strings.CutPrefix(s, "-- name: "); ok {
		if i := strings.IndexAny(rest, " \n"); i >= 0 {
			return rest[:i]
		}
		return rest
	}
	if i := strings.IndexAny(s, " \n\t;"); i >= 0 {
		s = s[:i]
	}
	if s == "" {
		return "statement"
	}
	return strings.ToLower(s)
}
