package testkit

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	tcexec "github.com/testcontainers/testcontainers-go/exec"
)

// Standby is a hot standby that streams from the test server, for the tests
// of read replicas. It is made once per test binary: from a
// TEST_DATABASE_URL server with the local PostgreSQL binaries
// (pg_basebackup -R, then postgres on a free port, as the postgres user when
// the tests run as root); in the testcontainers server's container with the
// container's own binaries; or it is given as TEST_READ_DATABASE_URL. The tests force its lag with
// recovery_min_apply_delay: Hold makes it apply nothing that commits from
// then on, CatchUp lets it apply everything. One test uses it at a time
// (Env takes it for the test's whole life).
type Standby struct {
	admin string // superuser connection string of the standby
	mu    sync.Mutex
}

const standbyHowTo = `no streaming standby for the read-replica tests. Either
  - let the test kit make one: TEST_DATABASE_URL names a PostgreSQL server that accepts
    replication connections from 127.0.0.1 (initdb's default pg_hba does) and the same
    major version's server binaries are installed (Debian: postgresql-15, under
    /usr/lib/postgresql/15/bin); .ci/run provides both;
  - or set TEST_READ_DATABASE_URL to a superuser connection string of a hot standby that
    streams from the TEST_DATABASE_URL server (the tests change its
    recovery_min_apply_delay with ALTER SYSTEM)`

var (
	standbyOnce sync.Once
	standby     *Standby
	standbyErr  error
	standbyProc *child // the standby the kit started (makeStandby)
	// standbySlot is the physical replication slot the standby streams
	// through, on the server it copies: the server keeps every WAL segment
	// the standby has not received, so that the standby, which the tests
	// hold behind for a while, never finds a segment the server already
	// removed ("requested WAL segment … has already been removed") while
	// parallel tests write much WAL. Dropped when the test binary ends.
	standbySlot = fmt.Sprintf("ordersvc_standby_%d", os.Getpid())
	standbyFrom string // the server the slot lives on
)

// StandbyOf returns the test server's standby, making it the first time.
// When none can be had, t fails with a message that says how to provide
// one; it never skips.
func StandbyOf(t testing.TB) *Standby {
	t.Helper()
	admin, err := server()
	if err != nil {
		t.Fatalf("%v\n%s", err, howTo)
	}
	standbyOnce.Do(func() {
		if u := os.Getenv("TEST_READ_DATABASE_URL"); u != "" {
			standby = &Standby{admin: u}
			return
		}
		if container != nil {
			standby, standbyErr = makeContainerStandby(admin)
			return
		}
		standby, standbyErr = makeStandby(admin)
	})
	if standbyErr != nil {
		t.Fatalf("make a standby of the test server: %v\n%s", standbyErr, standbyHowTo)
	}
	return standby
}

// makeStandby copies the test server with pg_basebackup -R and starts the
// copy as a hot standby on a free port.
func makeStandby(admin string) (*Standby, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return nil, err
	}
	var version, maxConns int
	err = conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int / 10000, current_setting('max_connections')::int`).Scan(&version, &maxConns)
	if err == nil {
		err = dropAbandonedSlots(ctx, conn)
	}
	conn.Close(ctx)
	if err != nil {
		return nil, err
	}
	bin := fmt.Sprintf("/usr/lib/postgresql/%d/bin", version)
	if _, err := os.Stat(filepath.Join(bin, "pg_basebackup")); err != nil {
		return nil, fmt.Errorf("no PostgreSQL %d server binaries: %w", version, err)
	}
	dir, err := os.MkdirTemp("", "ordersvc-standby-")
	if err != nil {
		return nil, err
	}
	standbyProc = &child{dir: dir}
	data := filepath.Join(dir, "data")
	backup := exec.CommandContext(ctx, filepath.Join(bin, "pg_basebackup"), "-d", admin, "-D", data, "-R", "-X", "stream", "-c", "fast",
		"-C", "-S", standbySlot)
	standbyFrom = admin
	if err := asPostgres(backup, dir, "pg_basebackup"); err != nil {
		return nil, err
	}
	if out, err := backup.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pg_basebackup -R from the test server: %v: %s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		return nil, err
	}
	// A hot standby needs max_connections at least the primary's.
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections="+strconv.Itoa(maxConns),
		"-c", "hot_standby=on", "-c", "hot_standby_feedback=on", "-c", "fsync=off")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := asPostgres(cmd, dir, "PostgreSQL"); err != nil {
		return nil, err
	}
	if err := standbyProc.start(cmd); err != nil {
		return nil, fmt.Errorf("start the standby: %w", err)
	}
	s := &Standby{admin: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)}
	return s, waitAnswers(ctx, s.admin, "the standby", standbyProc, func() string {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		return string(log)
	})
}

// standbyContainerPort is where the standby listens inside the test
// server's container.
const standbyContainerPort = "5433/tcp"

// makeContainerStandby makes the standby inside the testcontainers
// container, with its own binaries: pg_basebackup -R over the local socket
// (initdb's default pg_hba trusts local replication connections), then
// pg_ctl start on standbyContainerPort, which the container exposes. The
// copy keeps the primary's pg_hba and passwords.
func makeContainerStandby(admin string) (*Standby, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	maxConns, err := maxConnections(ctx, admin)
	if err != nil {
		return nil, err
	}
	for _, cmd := range [][]string{
		{"pg_basebackup", "-h", "/var/run/postgresql", "-U", "postgres", "-D", "/tmp/standby", "-R", "-X", "stream", "-c", "fast",
			"-C", "-S", standbySlot},
		{"pg_ctl", "-D", "/tmp/standby", "-l", "/tmp/standby.log", "-w", "start", "-o",
			"-p 5433 -c listen_addresses=* -c hot_standby=on -c hot_standby_feedback=on -c max_connections=" + strconv.Itoa(maxConns)},
	} {
		code, out, err := container.Exec(ctx, cmd, tcexec.WithUser("postgres"), tcexec.Multiplexed())
		if err != nil || code != 0 {
			b, _ := io.ReadAll(out)
			return nil, fmt.Errorf("%s in the test container: exit %d, %v: %s", cmd[0], code, err, b)
		}
	}
	host, err := container.Host(ctx)
	if err != nil {
		return nil, err
	}
	port, err := container.MappedPort(ctx, standbyContainerPort)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(admin)
	if err != nil {
		return nil, err
	}
	u.Host = net.JoinHostPort(host, port.Port())
	s := &Standby{admin: withDatabase(u.String(), "postgres")}
	return s, waitAnswers(ctx, s.admin, "the standby", nil, func() string {
		_, out, _ := container.Exec(context.Background(), []string{"cat", "/tmp/standby.log"}, tcexec.Multiplexed())
		if out == nil {
			return ""
		}
		b, _ := io.ReadAll(out)
		return string(b)
	})
}

// dropAbandonedSlots drops the standby slots of test binaries that ended
// without dropping theirs (killed): a slot nobody streams from would keep
// WAL on the server for ever. A slot is abandoned when it is inactive and
// the process its name carries no longer runs.
func dropAbandonedSlots(ctx context.Context, conn *pgx.Conn) error {
	rows, err := conn.Query(ctx, `SELECT slot_name FROM pg_replication_slots WHERE slot_name LIKE 'ordersvc_standby_%' AND NOT active`)
	if err != nil {
		return err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, name := range names {
		pid, err := strconv.Atoi(name[len("ordersvc_standby_"):])
		if err != nil || processRuns(pid) {
			continue
		}
		if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, name); err != nil {
			return fmt.Errorf("drop the abandoned slot %s: %w", name, err)
		}
	}
	return nil
}

// maxConnections is the server's max_connections: a hot standby needs at
// least the primary's.
func maxConnections(ctx context.Context, admin string) (int, error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, `SELECT current_setting('max_connections')::int`).Scan(&n)
	return n, err
}

// stopStandby stops the standby the kit made, at the end of the test binary.
func stopStandby() {
	standbyProc.stop(10 * time.Second)
	if standbyFrom != "" { // the standby is gone: the server need keep no WAL for it
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, standbyFrom); err == nil {
			_, _ = c.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active`, standbySlot)
			c.Close(ctx)
		}
	}
}

// URL is the connection string of database name on the standby.
func (s *Standby) URL(name string) string { return withDatabase(s.admin, name) }
