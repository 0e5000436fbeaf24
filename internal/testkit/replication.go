package testkit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PgBin is the directory of the PostgreSQL server binaries (initdb, pg_ctl,
// pg_basebackup) that StartReplication uses: TEST_PG_BIN, or Debian's
// PostgreSQL 15.
func PgBin() string {
	if d := os.Getenv("TEST_PG_BIN"); d != "" {
		return d
	}
	return "/usr/lib/postgresql/15/bin"
}

// Replication is a primary and a streaming standby made with the local
// PostgreSQL binaries, each a server of its own on a free port: what a
// failover test needs and a container per test would make slow. The
// standby is a pg_basebackup -R of the migrated primary.
type Replication struct {
	t       testing.TB
	Primary *Node
	Standby *Node
}

// Node is one PostgreSQL server of a Replication.
type Node struct {
	t    testing.TB
	Name string
	Port int
	dir  string
}

// StartReplication starts a primary with the migrated schema in its
// database postgres and a standby streaming from it. With sync, the primary
// acknowledges a COMMIT only once the standby has flushed its WAL
// (synchronous_standby_names = '*'); without, replication is asynchronous.
// No binaries is a failure that says how to provide them, never a skip.
func StartReplication(t testing.TB, sync bool) *Replication {
	t.Helper()
	bin := PgBin()
	if _, err := os.Stat(filepath.Join(bin, "pg_basebackup")); err != nil {
		t.Fatalf("failover tests need the PostgreSQL server binaries (initdb, pg_ctl, pg_basebackup) in %s: "+
			"install postgresql-15 (apt-get install postgresql-15) or set TEST_PG_BIN to their directory: %v", bin, err)
	}
	dir, err := os.MkdirTemp("", "ordersvc-replication-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := chownPostgres(dir); err != nil {
		t.Fatal(err)
	}
	r := &Replication{t: t, Primary: newNode(t, "primary", dir), Standby: newNode(t, "standby", dir)}
	r.Primary.run(bin+"/initdb", "-D", r.Primary.data(), "-U", "postgres", "--auth=trust")
	r.Primary.start()
	t.Cleanup(func() { r.Primary.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := migrate(ctx, r.Primary.URL()); err != nil {
		t.Fatalf("migrate the primary: %v", err)
	}
	r.Standby.run(bin+"/pg_basebackup", "-D", r.Standby.data(), "-R", "-X", "stream", "-c", "fast",
		"-h", "127.0.0.1", "-p", strconv.Itoa(r.Primary.Port), "-U", "postgres")
	r.Standby.start()
	t.Cleanup(func() { r.Standby.Stop() })
	r.Primary.WaitFor("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'", 1)
	if sync {
		// Only now: with no standby yet, the migrations' commits would wait.
		r.Primary.Exec("ALTER SYSTEM SET synchronous_standby_names = '*'")
		r.Primary.Exec("SELECT pg_reload_conf()")
		r.Primary.WaitFor("SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'", 1)
	}
	return r
}

// MultiHostURL names both servers, the primary first, with
// target_session_attrs=read-write: the driver connects to whichever of them
// takes writes (the alternative to HAProxy, docs/ha.md).
func (r *Replication) MultiHostURL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		r.Primary.Port, r.Standby.Port)
}

// HoldStandby stops the standby's WAL receiver (primary_conninfo emptied
// and reloaded) and waits until it has stopped: from then on the standby
// falls behind, as a standby on a slow or cut network does.
func (r *Replication) HoldStandby() {
	r.t.Helper()
	r.Standby.Exec("ALTER SYSTEM SET primary_conninfo = ''")
	r.Standby.Exec("SELECT pg_reload_conf()")
	r.Standby.WaitFor("SELECT count(*) FROM pg_stat_wal_receiver", 0)
}

func newNode(t testing.TB, name, dir string) *Node {
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return &Node{t: t, Name: name, Port: port, dir: dir}
}

func (n *Node) data() string { return filepath.Join(n.dir, n.Name) }

// URL is the node's own connection string.
func (n *Node) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", n.Port)
}

func (n *Node) start(opts ...string) {
	n.t.Helper()
	o := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=100 -c fsync=off -c wal_sender_timeout=5s -c wal_receiver_status_interval=1s %s",
		n.Port, n.dir, strings.Join(opts, " "))
	n.run(PgBin()+"/pg_ctl", "-D", n.data(), "-l", n.data()+".log", "-w", "-t", "60", "-o", o, "start")
}

// Start starts the node again after Stop.
func (n *Node) Start() { n.start() }

// Stop ends the server at once (pg_ctl stop -m immediate), as a crash of
// its machine would: nothing more is sent to its standby or its clients.
// Stopping a stopped node does nothing.
func (n *Node) Stop() {
	cmd := pgCommand(PgBin()+"/pg_ctl", "-D", n.data(), "-m", "immediate", "-w", "stop")
	_ = cmd.Run()
}

// Promote makes a standby the primary and waits until it takes writes.
func (n *Node) Promote() {
	n.t.Helper()
	n.run(PgBin()+"/pg_ctl", "-D", n.data(), "-w", "-t", "60", "promote")
	n.WaitFor("SELECT CASE WHEN pg_is_in_recovery() THEN 1 ELSE 0 END", 0)
}

// Exec runs sql on the node.
func (n *Node) Exec(sql string, args ...any) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, n.URL())
	if err != nil {
		n.t.Fatalf("%s: %v", n.Name, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		n.t.Fatalf("%s: %s: %v", n.Name, sql, err)
	}
}

// Int runs a query that returns one integer.
func (n *Node) Int(sql string, args ...any) int64 {
	n.t.Helper()
	v, err := n.queryInt(sql, args...)
	if err != nil {
		n.t.Fatalf("%s: %s: %v", n.Name, sql, err)
	}
	return v
}

// TryInt is Int that returns its error instead of failing the test, for
// use off the test's goroutine.
func (n *Node) TryInt(sql string, args ...any) (int64, error) { return n.queryInt(sql, args...) }

func (n *Node) queryInt(sql string, args ...any) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, n.URL())
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var v int64
	err = conn.QueryRow(ctx, sql, args...).Scan(&v)
	return v, err
}

// WaitFor polls an integer query until it returns want (up to a minute).
func (n *Node) WaitFor(sql string, want int64) {
	n.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		v, err := n.queryInt(sql)
		if err == nil && v == want {
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("%s: %s: got %d (err %v), want %d within a minute", n.Name, sql, v, err, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (n *Node) run(name string, args ...string) {
	n.t.Helper()
	out, err := pgCommand(name, args...).CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(n.data() + ".log")
		n.t.Fatalf("%s: %s %s: %v\n%s\n%s", n.Name, filepath.Base(name), strings.Join(args, " "), err, out, log)
	}
}

// pgCommand runs a PostgreSQL binary, as the postgres user when the tests
// run as root (initdb and postgres refuse root).
func pgCommand(name string, args ...string) *exec.Cmd {
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

func chownPostgres(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	return exec.Command("chown", "postgres", dir).Run()
}
