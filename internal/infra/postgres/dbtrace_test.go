package postgres_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/ordersvc/ordersvc/internal/infra/postgres"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// countingTracer counts the statements and batches it sees.
type countingTracer struct{ queries, batches atomic.Int64 }

func (c *countingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.queries.Add(1)
	return ctx
}
func (c *countingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *countingTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.batches.Add(1)
	return ctx
}
func (c *countingTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *countingTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// TestPoolTracingComposesWithTheGivenTracer: with a TracerProvider, the
// pool records one span per round trip made under a recording span (a
// statement, a batch named after its statements, a failure with its
// SQLSTATE and its error.type, a deadline that ran out as error.type
// timeout), none for a round trip outside one, and the tracer the caller
// gave (the test kit's hooks) still sees every statement and batch.
func TestPoolTracingComposesWithTheGivenTracer(t *testing.T) {
	t.Parallel()
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	given := &countingTracer{}
	pool, err := postgres.NewPool(context.Background(), postgres.PoolConfig{
		URL: testkit.DB(t), MaxConns: 2, StatementTimeout: 15 * time.Second, LockTimeout: 3 * time.Second,
		IdleInTxTimeout: 30 * time.Second, ConnectTimeout: 3 * time.Second, Tracer: given, TracerProvider: tp,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	// Outside any span: traced by the given tracer only.
	if _, err := pool.Exec(context.Background(), "select 1"); err != nil {
		t.Fatal(err)
	}
	if n := len(recorder.Ended()); n != 0 {
		t.Fatalf("%d spans for a statement made outside any span", n)
	}

	ctx, parent := tp.Tracer("test").Start(context.Background(), "request")
	if _, err := pool.Exec(ctx, "-- name: Ping :exec\nselect 1"); err != nil {
		t.Fatal(err)
	}
	b := &pgx.Batch{}
	b.Queue("-- name: First :one\nselect 1")
	b.Queue("-- name: Divide :one\nselect 1/0")
	if err := pool.SendBatch(ctx, b).Close(); err == nil {
		t.Fatal("a division by zero succeeded")
	}
	// A statement whose caller gives up: its deadline ends the wait.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = pool.Exec(short, "-- name: Sleep :exec\nselect pg_sleep(30)")
	cancel()
	if err == nil {
		t.Fatal("a 30 s sleep under a 100 ms deadline succeeded")
	}
	parent.End()

	if q, bs := given.queries.Load(), given.batches.Load(); q != 3 || bs != 1 {
		t.Errorf("the given tracer saw %d statements and %d batches, want 3 and 1", q, bs)
	}
	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range recorder.Ended() {
		spans[s.Name()] = s
	}
	ping, batch, sleep := spans["Ping"], spans["First + Divide"], spans["Sleep"]
	if ping == nil || batch == nil || sleep == nil || len(spans) != 4 {
		t.Fatalf("spans %v, want Ping, First + Divide, Sleep and the parent", keys(spans))
	}
	for _, s := range []sdktrace.ReadOnlySpan{ping, batch} {
		if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanKind() != trace.SpanKindClient {
			t.Errorf("span %s: parent %s kind %v, want a client span under the request", s.Name(), s.Parent().SpanID(), s.SpanKind())
		}
	}
	if ping.Status().Code != codes.Unset || hasKey(ping, "error.type") {
		t.Errorf("Ping: status %v, attributes %v; want no error", ping.Status(), ping.Attributes())
	}
	if batch.Status().Code != codes.Error || !hasAttribute(batch, "db.response.status_code", "22012") ||
		!hasAttribute(batch, "error.type", "22012") || !hasAttribute(batch, "db.operation.batch.size", "2") {
		t.Errorf("the failed batch: status %v, attributes %v; want an error, SQLSTATE 22012 as status code and error.type, batch size 2", batch.Status(), batch.Attributes())
	}
	if sleep.Status().Code != codes.Error || !hasAttribute(sleep, "error.type", "timeout") {
		t.Errorf("the statement past its deadline: status %v, attributes %v; want an error with error.type timeout", sleep.Status(), sleep.Attributes())
	}
}

func hasAttribute(s sdktrace.ReadOnlySpan, key, value string) bool {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key && kv.Value.String() == value {
			return true
		}
	}
	return false
}

func hasKey(s sdktrace.ReadOnlySpan, key string) bool {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return true
		}
	}
	return false
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestStatementName: the name a span and a test kit stop use for a statement.
func TestStatementName(t *testing.T) {
	t.Parallel()
	for sql, want := range map[string]string{
		"-- name: OrderInsert :one\nINSERT INTO orders …": "OrderInsert",
		"-- name: NaiveTakeStock\nUPDATE products …":      "NaiveTakeStock",
		"":                                     "statement",
		"commit":                               "commit",
		"begin isolation level read committed": "begin",
		"  SELECT 1":                           "select",
		"ROLLBACK;":                            "rollback",
	} {
		if got := postgres.StatementName(sql); got != want {
			t.Errorf("StatementName(%q) = %q, want %q", sql, got, want)
		}
	}
}
