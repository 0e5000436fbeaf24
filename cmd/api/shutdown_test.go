package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ordersvc/ordersvc/internal/testkit"
)

// heldListener hands out connections whose reads, once armed, keep the
// bytes they read from the server goroutine until released: the server has
// the next request in hand but has not parsed it, so the connection still
// counts as idle. That is the window in which a plain Shutdown closes a
// keep-alive connection whose client has already sent its request.
type heldListener struct {
	net.Listener
	armed   atomic.Bool
	release chan struct{}
}

func (l *heldListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &heldConn{Conn: c, l: l}, nil
}

type heldConn struct {
	net.Conn
	l *heldListener
}

func (c *heldConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.l.armed.Load() {
		<-c.l.release
	}
	return n, err
}

// shutdownWithRequestInFlight starts serve, sends one request on a
// keep-alive connection, then writes a second one in full, stops the
// service, and releases the server's read of the second request at the
// given step of the stop sequence. It returns the second response's status
// line, or the error reading it.
func shutdownWithRequestInFlight(t *testing.T, plain bool) (string, error) {
	t.Helper()
	url := testkit.DB(t)
	held := &heldListener{release: make(chan struct{})}
	var once sync.Once
	releaseRead := func() { once.Do(func() { close(held.release) }) }
	hooks := serveHooks{
		wrapListener:  func(ln net.Listener) net.Listener { held.Listener = ln; return held },
		plainShutdown: plain,
	}
	if plain {
		hooks.shutDown = releaseRead // Shutdown has closed the idle connections
	} else {
		hooks.closing = releaseRead // the grace has begun
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	listening := make(chan string, 1)
	done := make(chan error, 1)
	getenv := env("DATABASE_URL", url, "HTTP_ADDR", "127.0.0.1:0", "SHUTDOWN_TIMEOUT", "30s", "LOG_LEVEL", "error")
	go func() { done <- serve(ctx, getenv, t.Output(), listening, hooks) }()
	var addr string
	select {
	case addr = <-listening:
	case err := <-done:
		t.Fatalf("serve ended: %v", err)
	}
	defer func() {
		releaseRead()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(conn)
	get := "GET /healthz HTTP/1.1\r\nHost: api\r\n\r\n"
	if _, err := io.WriteString(conn, get); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(r, nil)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("first request: %v %v", res, err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()

	// The second request is written in full before the signal.
	held.armed.Store(true)
	if _, err := io.WriteString(conn, get); err != nil {
		t.Fatal(err)
	}
	cancel() // the signal
	res, err = http.ReadResponse(r, nil)
	if err != nil {
		return "", err
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(body) != "ok\n" {
		t.Fatalf("second response body %q", body)
	}
	if res.Close {
		return res.Status + ", Connection: close", nil
	}
	return res.Status, nil
}

// TestShutdownAnswersARequestWrittenBeforeTheSignal: a keep-alive client
// has written its next request in full when the process is told to stop;
// the server has read the bytes but not yet parsed them. The stop sequence
// answers it (with Connection: close). The naive variant, http.Server's
// Shutdown alone, closes the connection under the request.
func TestShutdownAnswersARequestWrittenBeforeTheSignal(t *testing.T) {
	t.Run("naive plain Shutdown is caught", func(t *testing.T) {
		status, err := shutdownWithRequestInFlight(t, true)
		if err == nil {
			t.Fatalf("the plain Shutdown answered the request (%s): the test cannot tell the two apart", status)
		}
		t.Logf("naive variant: the request written before the signal got no answer: %v", err)
	})
	t.Run("stop sequence answers", func(t *testing.T) {
		status, err := shutdownWithRequestInFlight(t, false)
		if err != nil {
			t.Fatalf("the request written before the signal got no answer: %v", err)
		}
		if !strings.HasPrefix(status, "200") || !strings.HasSuffix(status, "close") {
			t.Fatalf("second response %q, want 200 with Connection: close", status)
		}
		t.Logf("answered: %s", status)
	})
}

// TestShutdownDrainTurnsReadyzFirst: after the signal /readyz answers 503
// (with Retry-After) for SHUTDOWN_DRAIN while every other request is still
// served; then the process stops and serve returns nil (exit 0). The stop
// sequence is held at the start of its drain while the test asks, so that
// the answers come within the drain however slow the machine.
func TestShutdownDrainTurnsReadyzFirst(t *testing.T) {
	url := testkit.DB(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	listening := make(chan string, 1)
	done := make(chan error, 1)
	draining, asked := make(chan struct{}), make(chan struct{})
	var once sync.Once
	goOn := func() { once.Do(func() { close(asked) }) }
	defer goOn()
	hooks := serveHooks{draining: func() { close(draining); <-asked }}
	getenv := env("DATABASE_URL", url, "HTTP_ADDR", "127.0.0.1:0", "SHUTDOWN_DRAIN", "3s", "LOG_LEVEL", "error")
	go func() { done <- serve(ctx, getenv, t.Output(), listening, hooks) }()
	base := "http://" + <-listening
	client := &http.Client{Timeout: 30 * time.Second}
	status := func(path string) (int, http.Header) {
		res, err := client.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode, res.Header
	}
	if s, _ := status("/readyz"); s != http.StatusOK {
		t.Fatalf("/readyz before the signal: %d", s)
	}
	signalled := time.Now()
	cancel()
	select {
	case <-draining:
	case err := <-done:
		t.Fatalf("serve returned %v without draining", err)
	}
	if s, h := status("/readyz"); s != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
		t.Fatalf("/readyz during the drain: %d (Retry-After %q), want 503 with Retry-After", s, h.Get("Retry-After"))
	}
	// The other endpoints answer.
	if s, _ := status("/healthz"); s != http.StatusOK {
		t.Fatalf("/healthz during the drain: %d", s)
	}
	if s, _ := status("/v1/products"); s != http.StatusUnauthorized {
		t.Fatalf("/v1/products without a token during the drain: %d, want 401 (served)", s)
	}
	goOn()
	if err := <-done; err != nil {
		t.Fatalf("serve after the drain: %v", err)
	}
	if took := time.Since(signalled); took < 3*time.Second {
		t.Fatalf("stopped %s after the signal, before the 3 s drain ended", took)
	}
}
