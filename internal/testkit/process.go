package testkit

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"time"

	"github.com/jackc/pgx/v5"
)

// child is a program the kit runs in a directory of its own: PgBouncer
// (pgbouncer.go) or a standby's PostgreSQL (standby.go). It is stopped, and
// its directory removed, when its test (StartPgBouncer) or the test binary
// (Main) ends.
type child struct {
	dir  string
	cmd  *exec.Cmd
	done chan struct{} // closed once the program has exited
	err  error         // how it exited, once done
}

// start starts cmd, which asPostgres prepared.
func (c *child) start(cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	c.cmd, c.done = cmd, make(chan struct{})
	go func() { c.err = cmd.Wait(); close(c.done) }()
	return nil
}

// stop stops the program, if it runs, and removes its directory: with a
// grace, SIGINT first (PostgreSQL's fast shutdown) and SIGKILL when the
// grace is over; without one, SIGKILL at once.
func (c *child) stop(grace time.Duration) {
	if c == nil {
		return
	}
	if c.cmd != nil {
		sig := os.Kill
		if grace > 0 {
			sig = os.Interrupt
		}
		_ = c.cmd.Process.Signal(sig)
		select {
		case <-c.done:
		case <-time.After(grace):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	}
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
}

// waitAnswers waits until the server at url answers a query, until ctx ends
// or c's program exits (c may be nil: a server the kit did not start); log
// tells why not.
func waitAnswers(ctx context.Context, url, what string, c *child, log func() string) error {
	var exited <-chan struct{}
	if c != nil {
		exited = c.done
	}
	for {
		err := answers(ctx, url)
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited: %v\n%s", what, c.err, log())
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer: %v\n%s", what, err, log())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// answers connects to url and runs one query, within a second.
func answers(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "select 1")
	return err
}

// freePort is a TCP port of 127.0.0.1 that nothing listens on.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
