package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// A comparison (-compare, BENCH_COMPARE) runs one load against the service
// in two configurations, alternating them in one session (off, on, on, off,
// …: a drift of the shared machine's load falls on both sides alike), and
// writes its own section of REPORT.md. It skips the scenario matrix and
// pgbench.

const (
	tracingBegin = "<!-- BEGIN GENERATED tracing comparison by bench/run.sh: do not edit between these markers -->"
	tracingEnd   = "<!-- END GENERATED tracing comparison -->"
)

// Comparison is what one -compare session measured.
type Comparison struct {
	What        string    `json:"what"`
	Scenario    string    `json:"scenario"`
	Concurrency int       `json:"concurrency"`
	Rounds      int       `json:"rounds"`
	Started     time.Time `json:"started"`
	Finished    time.Time `json:"finished"`
	Machine     Machine   `json:"machine"`
	Settings    Settings  `json:"settings"`
	Sides       []Side    `json:"sides"`
	// Spans the OTLP receiver decoded during the measured windows of the
	// traced side, and the export requests that carried them.
	Spans   int64 `json:"spans"`
	Exports int64 `json:"exports"`
	Bytes   int64 `json:"bytes"`
}

// Side is one configuration of a comparison and its runs, in the order run.
type Side struct {
	Label string   `json:"label"`
	Env   []string `json:"env,omitempty"`
	Runs  []Run    `json:"runs"`
}

func (e *env) compare(ctx context.Context) error {
	switch e.o.compare {
	case "tracing":
		return e.compareTracing(ctx)
	case "pgbouncer":
		return e.comparePgBouncer(ctx)
	}
	return fmt.Errorf("unknown -compare %q (known: tracing, pgbouncer)", e.o.compare)
}

// compareTracing measures what tracing costs: the spread placement load at
// the top concurrency against the service with tracing off and with tracing
// on, the latter exporting every span with OTLP over HTTP to a receiver in
// this process that decodes the requests enough to count their spans and
// then discards them, so that the exporter really serialises and sends.
func (e *env) compareTracing(ctx context.Context) error {
	sink, err := startOTLPSink()
	if err != nil {
		return err
	}
	defer sink.close()
	base := e.variants[0]
	off := &variant{label: "tracing-off", bin: base.bin}
	on := &variant{label: "tracing-on", bin: base.bin,
		env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + sink.url, "OTEL_SERVICE_NAME=ordersvc-bench"}}
	c := e.o.concurrency[len(e.o.concurrency)-1]
	cmp := &Comparison{What: "tracing", Scenario: "spread", Concurrency: c, Rounds: e.o.compareRounds,
		Started: time.Now().UTC(), Machine: base.res.Machine, Settings: base.res.Settings}
	e.variants = []*variant{off, on}
	for _, v := range e.variants {
		v.res = &Results{Label: v.label, Started: cmp.Started, Machine: base.res.Machine, Settings: base.res.Settings}
	}
	defer func() { e.measureHook = nil }()
	for round := 0; round < e.o.compareRounds; round++ {
		order := []*variant{off, on}
		if round%2 == 1 {
			order = []*variant{on, off}
		}
		for _, v := range order {
			e.use(v)
			var before sinkCount
			e.measureHook = func(open bool) {
				if v != on {
					return
				}
				if open {
					before = sink.count()
				} else {
					d := sink.count().minus(before)
					cmp.Spans += d.spans
					cmp.Exports += d.requests
					cmp.Bytes += d.bytes
				}
			}
			if err := e.serviceRun(ctx, "spread", c, 0); err != nil {
				return err
			}
		}
	}
	e.stopAPI()
	cmp.Finished = time.Now().UTC()
	failed := false
	for _, v := range e.variants {
		cmp.Sides = append(cmp.Sides, Side{Label: v.label, Env: v.env, Runs: v.res.Runs})
		for _, r := range v.res.Runs {
			failed = failed || r.Failed
		}
	}
	if errs := sink.errors.Load(); errs > 0 {
		return fmt.Errorf("the OTLP receiver could not read %d export requests", errs)
	}
	if err := writeComparison(e.o.out, cmp); err != nil {
		return err
	}
	log.Print(strings.TrimSpace(comparisonSummary(cmp)))
	if failed {
		return errors.New("FAILED: a run broke an invariant or got unexpected responses; see REPORT.md")
	}
	return nil
}

// writeComparison stores the comparison in compare/<what>.json and rewrites
// its section of REPORT.md.
func writeComparison(out string, cmp *Comparison) error {
	dir := filepath.Join(out, "compare")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(cmp, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, cmp.What+".json"), b, 0o644); err != nil {
		return err
	}
	return writeSection(filepath.Join(out, "REPORT.md"), tracingBegin, tracingEnd, comparisonSection(cmp))
}

// sideTotals sums a side's runs: orders per second over the measured
// windows, API CPU per 1,000 orders, the other processes' CPU.
type sideTotals struct {
	throughput, apiPerK, other float64
	p50, p99                   []float64
	ok                         bool
}

func totals(s Side) sideTotals {
	var orders int64
	var secs, api float64
	t := sideTotals{ok: true}
	for _, r := range s.Runs {
		orders += r.Orders
		secs += r.Seconds
		api += r.CPU.API
		t.other += r.CPU.Other
		t.p50 = append(t.p50, r.Latency.P50)
		t.p99 = append(t.p99, r.Latency.P99)
		t.ok = t.ok && !r.Failed
	}
	if secs > 0 {
		t.throughput = float64(orders) / secs
	}
	if orders > 0 {
		t.apiPerK = 1000 * api / float64(orders)
	}
	return t
}

func ms(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.1f", x)
	}
	return strings.Join(parts, ", ")
}

func comparisonSummary(cmp *Comparison) string {
	if len(cmp.Sides) != 2 {
		return ""
	}
	a, b := totals(cmp.Sides[0]), totals(cmp.Sides[1])
	return fmt.Sprintf("%s: %s %.0f/s p99 %.1f ms, %s %.0f/s p99 %.1f ms: throughput ratio %.2f, p99 ratio %.2f, API CPU per order ratio %.2f\n",
		cmp.What, cmp.Sides[0].Label, a.throughput, mean(a.p99), cmp.Sides[1].Label, b.throughput, mean(b.p99),
		b.throughput/a.throughput, mean(b.p99)/mean(a.p99), b.apiPerK/a.apiPerK)
}

func comparisonSection(cmp *Comparison) string {
	var b strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }
	if len(cmp.Sides) != 2 || len(cmp.Sides[0].Runs) == 0 || len(cmp.Sides[1].Runs) == 0 {
		return ""
	}
	off, on := totals(cmp.Sides[0]), totals(cmp.Sides[1])
	run := cmp.Sides[0].Runs[0]
	p("Measured %s to %s on %d cores (%s), commit %s: `%s` placements at c=%d, %d rounds of %.0f s per side, alternating (off, on, on, off, …).\n\n",
		cmp.Started.Format("2006-01-02 15:04"), cmp.Finished.Format("15:04 UTC"), cmp.Machine.NProc, cmp.Machine.CPUModel,
		cmp.Machine.Commit, cmp.Scenario, cmp.Concurrency, cmp.Rounds, run.Seconds)
	p("| | placements/s | p50 ms (each run) | p99 ms (each run) | API CPU s per 1k orders | other processes' CPU s | invariants |\n")
	p("| --- | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for i, t := range []sideTotals{off, on} {
		verdict := "held"
		if !t.ok {
			verdict = "**FAILED**"
		}
		p("| %s | %.0f | %s | %s | %.2f | %.0f | %s |\n", cmp.Sides[i].Label, t.throughput, ms(t.p50), ms(t.p99), t.apiPerK, t.other, verdict)
	}
	p("\n**Tracing on ÷ off: throughput %.2f×, mean p99 %.2f× (%.1f → %.1f ms), API CPU per order %.2f×.**\n",
		on.throughput/off.throughput, mean(on.p99)/mean(off.p99), mean(off.p99), mean(on.p99), on.apiPerK/off.apiPerK)
	var placed int64
	for _, r := range cmp.Sides[1].Runs {
		placed += r.Requests
	}
	if placed > 0 && cmp.Exports > 0 {
		p("During the traced windows the receiver decoded %d spans in %d export requests (%.1f MB), %.1f spans per placement request.\n",
			cmp.Spans, cmp.Exports, float64(cmp.Bytes)/1e6, float64(cmp.Spans)/float64(placed))
	}
	return b.String()
}

// ---- the OTLP receiver

// otlpSink accepts OTLP/HTTP trace exports (protobuf, gzip or not), counts
// their spans, and discards them.
type otlpSink struct {
	srv                    *http.Server
	url                    string
	requests, bytes, spans atomic.Int64
	errors                 atomic.Int64
}

type sinkCount struct{ requests, bytes, spans int64 }

func (c sinkCount) minus(d sinkCount) sinkCount {
	return sinkCount{c.requests - d.requests, c.bytes - d.bytes, c.spans - d.spans}
}

func startOTLPSink() (*otlpSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &otlpSink{url: "http://" + ln.Addr().String()}
	s.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err == nil && r.Header.Get("Content-Encoding") == "gzip" {
			var zr *gzip.Reader
			if zr, err = gzip.NewReader(bytes.NewReader(body)); err == nil {
				body, err = io.ReadAll(zr)
			}
		}
		n := 0
		if err == nil {
			n, err = countSpans(body)
		}
		if r.URL.Path != "/v1/traces" || err != nil {
			s.errors.Add(1)
			http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
			return
		}
		s.requests.Add(1)
		s.bytes.Add(int64(len(body)))
		s.spans.Add(int64(n))
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK) // an empty ExportTraceServiceResponse: all accepted
	})}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *otlpSink) count() sinkCount {
	return sinkCount{s.requests.Load(), s.bytes.Load(), s.spans.Load()}
}

func (s *otlpSink) close() { _ = s.srv.Close() }

// countSpans counts the spans of an ExportTraceServiceRequest: field 1
// (resource_spans) → field 2 (scope_spans) → field 2 (spans), read with the
// protobuf wire format alone.
func countSpans(req []byte) (int, error) {
	n := 0
	err := protoFields(req, func(num int, rs []byte) error {
		if num != 1 {
			return nil
		}
		return protoFields(rs, func(num int, ss []byte) error {
			if num != 2 {
				return nil
			}
			return protoFields(ss, func(num int, _ []byte) error {
				if num == 2 {
					n++
				}
				return nil
			})
		})
	})
	return n, err
}

var errWire = errors.New("malformed protobuf")

// protoFields calls fn with each length-delimited field of a protobuf
// message (its number and bytes), skipping the other wire types.
func protoFields(b []byte, fn func(num int, val []byte) error) error {
	for len(b) > 0 {
		key, n := binary.Uvarint(b)
		if n <= 0 {
			return errWire
		}
		b = b[n:]
		switch key & 7 {
		case 0: // varint
			if _, n = binary.Uvarint(b); n <= 0 {
				return errWire
			}
			b = b[n:]
		case 1: // fixed64
			if len(b) < 8 {
				return errWire
			}
			b = b[8:]
		case 5: // fixed32
			if len(b) < 4 {
				return errWire
			}
			b = b[4:]
		case 2: // length-delimited
			l, n := binary.Uvarint(b)
			if n <= 0 || l > uint64(len(b)-n) {
				return errWire
			}
			val := b[n : n+int(l)]
			b = b[n+int(l):]
			if err := fn(int(key>>3), val); err != nil {
				return err
			}
		default:
			return errWire
		}
	}
	return nil
}
