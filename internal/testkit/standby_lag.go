package testkit

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// acquire takes the standby for t until t ends; its lag is released then.
func (s *Standby) acquire(t testing.TB) {
	s.mu.Lock()
	t.Cleanup(func() {
		s.setDelay(t, "0")
		s.mu.Unlock()
	})
}

// CatchUp lets the standby apply everything and waits until it has replayed
// all that the test server had written when CatchUp was called.
func (s *Standby) CatchUp(t testing.TB) {
	t.Helper()
	s.setDelay(t, "0")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, _ := server()
	target := walPosition(ctx, t, admin, `SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint, current_setting('wal_block_size')::bigint`)
	for {
		replayed := walPosition(ctx, t, s.admin, `SELECT coalesce((pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint, -1), 0::bigint`)
		if replayed >= target {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the standby did not catch up: replayed %d, want %d", replayed, target)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Hold makes the standby apply nothing that commits on the test server from
// now on (recovery_min_apply_delay = 1h), after catching it up. It returns
// once the standby's startup process is seen waiting on a commit made after
// the change, so the hold is in force, not merely asked for.
func (s *Standby) Hold(t testing.TB) {
	t.Helper()
	s.CatchUp(t)
	s.setDelay(t, "1h")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, _ := server()
	for {
		probe, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Fatalf("hold the standby: %v", err)
		}
		// A transaction with an xid writes a commit record, which the
		// delay holds back.
		_, err = probe.Exec(ctx, `SELECT pg_current_xact_id()`)
		probe.Close(ctx)
		if err != nil {
			t.Fatalf("hold the standby: %v", err)
		}
		for range 50 {
			var waiting bool
			err := s.query(ctx, t, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE backend_type = 'startup' AND wait_event = 'RecoveryApplyDelay')`, &waiting)
			if err != nil {
				t.Fatalf("hold the standby: %v", err)
			}
			if waiting {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		if ctx.Err() != nil {
			t.Fatal("hold the standby: its startup process never waited on recovery_min_apply_delay")
		}
	}
}

func (s *Standby) setDelay(t testing.TB, delay string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.admin)
	if err != nil {
		t.Fatalf("connect to the standby: %v\n%s", err, standbyHowTo)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `ALTER SYSTEM SET recovery_min_apply_delay = '`+delay+`'`); err != nil {
		t.Fatalf("set recovery_min_apply_delay on the standby: %v", err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
		t.Fatalf("reload the standby's configuration: %v", err)
	}
}

func (s *Standby) query(ctx context.Context, t testing.TB, sql string, dest ...any) error {
	conn, err := pgx.Connect(ctx, s.admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.QueryRow(ctx, sql).Scan(dest...)
}

// walPosition reads a WAL position and a page size with sql on the server
// at u. An insert position just past a page header is taken as the page
// start, where the last record ended (see store.ReplicaReader and postgres.Pool.WALFence).
func walPosition(ctx context.Context, t testing.TB, u, sql string) int64 {
	t.Helper()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("read a WAL position at %s: %v", redact(u), err)
	}
	defer conn.Close(ctx)
	var pos, page int64
	if err := conn.QueryRow(ctx, sql).Scan(&pos, &page); err != nil {
		t.Fatalf("read a WAL position: %v", err)
	}
	if off := pos % max(page, 1); page > 0 && off <= 40 {
		pos -= off
	}
	return pos
}

func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "the server"
	}
	return p.Redacted()
}
