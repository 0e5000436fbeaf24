package main

import (
	"fmt"
	"strings"
)

// work renders the pg_stat_statements phase (pgss.go): one row per
// request kind, then the statements of a placement beside those of the
// pipelined ceiling.
func (m *md) work(ws []*Work) {
	if len(ws) == 0 {
		return
	}
	m.p("\n### What one request costs PostgreSQL (pg_stat_statements)\n\n")
	m.p("%d requests of each kind at concurrency 1 straight to the server, after 100 unmeasured ones; `pg_stat_statements` (track = all, track_planning = on, top-level statements) reset before them and read after, per request. ", ws[0].Requests)
	m.p("`exec` and `plan` are the statements' executor and planner time; `pg CPU` is all the PostgreSQL processes' CPU (protocol, parse, bind, executor, commit, wake-ups); `api CPU` the service's. ")
	m.p("`keys` is the share of exec + plan time in the idempotency-key statements. `cache_describe` is the service with pgx's `default_query_exec_mode=cache_describe` (every statement parsed again, as through PgBouncer 1.18), straight to the server; `force_generic_plan` the service with PostgreSQL's `plan_cache_mode=force_generic_plan` on its connections (no statement planned again per call). BEGIN and COMMIT, sent as prepared statements, are not counted by pg_stat_statements 15 (they show in `cache_describe`).\n\n")
	m.p("| request | statements | exec ms | plan ms | pg CPU ms | api CPU ms | latency p50 / mean ms | keys |\n")
	m.p("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, w := range ws {
		api, p50 := "–", "–"
		if !strings.HasPrefix(w.Case, "pgbench") {
			api, p50 = fmt.Sprintf("%.3f", w.APICPUMs), fmt.Sprintf("%.3f", w.P50Ms)
		}
		m.p("| %s | %.2f | %.3f | %.3f | %.3f | %s | %s / %.3f | %.0f%% |\n",
			w.Case, w.Calls, w.ExecMs, w.PlanMs, w.PgCPUMs, api, p50, w.MeanMs, 100*w.KeysShare)
	}
	for _, name := range []string{"placement", "pgbench pipelined"} {
		if w := findWork(ws, name); w != nil {
			m.stmtTable(w)
		}
	}
}

func (m *md) stmtTable(w *Work) {
	m.p("\nStatements of one request, %s (per request; WAL in bytes; * an idempotency-key statement):\n\n", w.Case)
	m.p("| statement | calls | exec ms | plan ms | plans | rows | buffers hit | WAL bytes |\n")
	m.p("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, s := range w.Statements {
		if s.Calls < 0.005 {
			continue // the service's background work, not the request's
		}
		star := ""
		if s.Keys {
			star = " *"
		}
		m.p("| `%s`%s | %.2f | %.4f | %.4f | %.2f | %.2f | %.1f | %.0f |\n",
			strings.ReplaceAll(s.Name, "|", "\\|"), star, s.Calls, s.ExecMs, s.PlanMs, s.Plans, s.Rows, s.BlksHit, s.WALBytes)
	}
}

func findWork(ws []*Work, name string) *Work {
	for _, w := range ws {
		if w.Case == name {
			return w
		}
	}
	return nil
}
