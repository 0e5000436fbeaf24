package testkit

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// With TEST_PGBOUNCER=1 the tests reach their databases through a real
// PgBouncer in transaction pooling mode, default settings otherwise (only
// the client connection limit is raised for parallel tests): DB returns a
// connection string to PgBouncer, with pgx's default_query_exec_mode set to
// TEST_PGBOUNCER_EXEC_MODE [cache_describe]. Databases are still created,
// migrated and dropped directly (goose's session lock, CREATE DATABASE).
//
// PgBouncer is the Debian package's binary (/usr/sbin/pgbouncer, or
// PGBOUNCER_BIN), started once per test binary on a free port and stopped
// when the tests end. It refuses to run as root; as root the test kit starts
// it as the postgres user.
const pgbouncerHowTo = `TEST_PGBOUNCER=1 needs the pgbouncer binary (Debian: apt-get install pgbouncer) and, when the tests run as root, a postgres user`

var (
	bouncerOnce sync.Once
	bouncerAddr string
	bouncerErr  error
	bouncer     *Bouncer
)

// ThroughPgBouncer says whether the tests run through PgBouncer.
func ThroughPgBouncer() bool { return os.Getenv("TEST_PGBOUNCER") == "1" }

// pgbouncerExecMode is the query exec mode the tests use behind PgBouncer.
func pgbouncerExecMode() string {
	if m := os.Getenv("TEST_PGBOUNCER_EXEC_MODE"); m != "" {
		return m
	}
	return "cache_describe"
}

// viaPgBouncer returns the connection string of database name through
// PgBouncer, which forwards to the server of admin.
func viaPgBouncer(admin, name string) (string, error) {
	bouncerOnce.Do(func() { bouncerAddr, bouncerErr = startPgBouncer(admin) })
	if bouncerErr != nil {
		return "", bouncerErr
	}
	u, err := url.Parse(withDatabase(admin, name))
	if err != nil {
		return "", err
	}
	u.Host = bouncerAddr
	q := u.Query()
	q.Set("default_query_exec_mode", pgbouncerExecMode())
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// Direct returns the connection string that reaches the same database as
// dbURL without PgBouncer, for what a transaction pooler cannot carry
// (session locks, LISTEN, pg_terminate_backend of a known backend). Without
// TEST_PGBOUNCER it is dbURL.
func Direct(dbURL string) string {
	if !ThroughPgBouncer() {
		return dbURL
	}
	admin, err := server()
	if err != nil {
		return dbURL
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		return dbURL
	}
	return withDatabase(admin, strings.TrimPrefix(u.Path, "/"))
}

func startPgBouncer(admin string) (string, error) {
	b, err := newBouncer(admin)
	if err != nil {
		return "", err
	}
	bouncer = b
	return b.addr, nil
}

// Bouncer is a PgBouncer of a test's own, in front of a target it chooses
// (for example a Proxy that can stop like a failed server).
type Bouncer struct {
	addr string
	proc *child
}

// StartPgBouncer starts a PgBouncer in transaction mode, default settings
// otherwise, that forwards to target (host:port) as the test server's user,
// and stops it when t ends. It needs the Debian pgbouncer package.
func StartPgBouncer(t testing.TB, target string) *Bouncer {
	t.Helper()
	admin, err := server()
	if err != nil {
		t.Fatalf("%v\n%s", err, howTo)
	}
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = target
	b, err := newBouncer(u.String())
	if err != nil {
		t.Fatalf("start pgbouncer: %v", err)
	}
	t.Cleanup(func() { b.proc.stop(0) })
	return b
}

// Via returns dbURL with its host replaced by the bouncer's and pgx's
// default_query_exec_mode set to cache_describe.
func (b *Bouncer) Via(dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		return dbURL
	}
	u.Host = b.addr
	q := u.Query()
	q.Set("default_query_exec_mode", "cache_describe")
	u.RawQuery = q.Encode()
	return u.String()
}

// newBouncer starts a PgBouncer in front of the server of admin.
func newBouncer(admin string) (*Bouncer, error) {
	bin := os.Getenv("PGBOUNCER_BIN")
	if bin == "" {
		bin = "/usr/sbin/pgbouncer"
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, pgbouncerHowTo)
	}
	au, err := url.Parse(admin)
	if err != nil {
		return nil, err
	}
	pgHost, pgPort := au.Hostname(), au.Port()
	if pgPort == "" {
		pgPort = "5432"
	}
	user := au.User.Username()
	password, _ := au.User.Password()

	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "ordersvc-pgbouncer-")
	if err != nil {
		return nil, err
	}
	conf := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
max_client_conn = 5000
logfile = %s
pidfile = %s
`, pgHost, pgPort, port, filepath.Join(dir, "userlist.txt"), filepath.Join(dir, "pgbouncer.log"), filepath.Join(dir, "pgbouncer.pid"))
	if password != "" {
		// PgBouncer logs in to the server with the password it knows for
		// the user (auth_file), the client's own is not checked (trust).
		conf = strings.Replace(conf, "* = host=", "* = password="+password+" host=", 1)
	}
	files := map[string]string{
		"pgbouncer.ini": conf,
		"userlist.txt":  fmt.Sprintf("%q %q\n", user, password),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			return nil, err
		}
	}
	proc := &child{dir: dir}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	if err := asPostgres(cmd, dir, "pgbouncer"); err != nil {
		proc.stop(0)
		return nil, fmt.Errorf("%w\n%s", err, pgbouncerHowTo)
	}
	if err := proc.start(cmd); err != nil {
		proc.stop(0)
		return nil, fmt.Errorf("start pgbouncer: %w\n%s", err, pgbouncerHowTo)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	probe, _ := url.Parse(withDatabase(admin, "postgres"))
	probe.Host = addr
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err = waitAnswers(ctx, probe.String()+"&default_query_exec_mode=exec", "pgbouncer on "+addr, proc, func() string {
		log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
		return string(log)
	})
	if err != nil {
		proc.stop(0)
		return nil, err
	}
	return &Bouncer{addr: addr, proc: proc}, nil
}

func stopPgBouncer() {
	if bouncer != nil {
		bouncer.proc.stop(0)
	}
}
