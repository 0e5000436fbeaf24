package main

import (
	"context"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

func machine(ctx context.Context, conn *pgx.Conn, commit string) Machine {
	m := Machine{NProc: runtime.NumCPU(), Go: runtime.Version(), Commit: commit}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				m.CPUModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				kb, _ := strconv.ParseFloat(strings.Fields(v)[0], 64)
				m.MemGiB = math.Round(kb/1024/1024*10) / 10
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	_ = conn.QueryRow(ctx, `SELECT version()`).Scan(&m.Postgres)
	return m
}

func pgSettings(ctx context.Context, conn *pgx.Conn) []string {
	rows, err := conn.Query(ctx, `SELECT name || '=' || setting || coalesce(unit, '') FROM pg_settings
		WHERE name IN ('shared_buffers','max_connections','fsync','synchronous_commit','full_page_writes','wal_level','autovacuum')
		ORDER BY name`)
	if err != nil {
		return nil
	}
	out, _ := pgx.CollectRows(rows, pgx.RowTo[string])
	return out
}
