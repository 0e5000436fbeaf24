package main

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// bouncerProc is a PgBouncer the benchmark started.
type bouncerProc struct {
	cmd     *exec.Cmd
	addr    string
	dir     string
	version string
}

// startBouncer starts Debian's pgbouncer in transaction mode, PgBouncer's
// defaults otherwise, in front of the server of dbURL (trust, as the
// benchmark server is). PgBouncer refuses to run as root; as root it runs as
// the postgres user, as the test kit does (internal/testkit/pgbouncer.go).
func startBouncer(bin, dbURL, raw string) (*bouncerProc, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%w (Debian: apt-get install pgbouncer; or -pgbouncer-bin)", err)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		return nil, err
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	dir, err := os.MkdirTemp("", "ordersvc-bench-pgbouncer-")
	if err != nil {
		return nil, err
	}
	conf := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %s
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
logfile = %s
`, u.Hostname(), u.Port(), port, filepath.Join(dir, "userlist.txt"), filepath.Join(raw, "pgbouncer.log"))
	files := map[string]string{"pgbouncer.ini": conf, "userlist.txt": fmt.Sprintf("%q \"\"\n", u.User.Username())}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() == 0 {
		pg, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("run pgbouncer as postgres: %w", err)
		}
		uid, _ := strconv.Atoi(pg.Uid)
		gid, _ := strconv.Atoi(pg.Gid)
		for _, p := range []string{dir, filepath.Join(raw, "pgbouncer.log")} {
			if f, err := os.OpenFile(p, os.O_CREATE|os.O_RDONLY, 0o644); err == nil {
				f.Close()
			}
			if err := os.Chown(p, uid, gid); err != nil {
				return nil, err
			}
		}
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	version, _ := exec.Command(bin, "--version").Output()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start pgbouncer: %w", err)
	}
	b := &bouncerProc{cmd: cmd, addr: addr, dir: dir, version: firstLine(string(version))}
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return b, nil
		}
		if time.Now().After(deadline) {
			b.stop()
			return nil, fmt.Errorf("pgbouncer did not listen on %s; see %s", addr, filepath.Join(raw, "pgbouncer.log"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (b *bouncerProc) stop() {
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = b.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = b.cmd.Process.Kill()
		<-done
	}
	_ = os.RemoveAll(b.dir)
}

func firstLine(s string) string {
	for i, r := range s {
		if r == '\n' {
			return s[:i]
		}
	}
	return s
}
