package main

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// idleGrace is how long a keep-alive connection that sits idle when the
// service stops taking requests is still read from. A request the client
// wrote before the signal is already in the socket's receive buffer, so the
// read returns it at once and it is served; a connection with nothing
// pending closes when the grace ends.
const idleGrace = 500 * time.Millisecond

// connTracker carries the shutdown sequence of `api serve` past the point
// where http.Server.Shutdown alone loses requests.
//
// Shutdown closes every keep-alive connection that is idle, that is, whose
// server goroutine has not yet read a byte of the next request. A client may
// have written that request already: the server closes the connection under
// it, the client (which retries a POST carrying an Idempotency-Key on a new
// connection) meets the closed listener, and a request sent before the
// signal gets no answer. So the service stops in three steps (serve):
//
//  1. draining (SHUTDOWN_DRAIN): /readyz answers 503, everything else is
//     served as usual, so a load balancer stops sending new requests;
//  2. closing: the listener closes, every response carries Connection:
//     close, and an idle keep-alive connection is read from for idleGrace
//     more (its idle read deadline is cut to the end of the grace instead
//     of being closed under it): a request already sent is read and served,
//     a silent connection ends by itself;
//  3. Shutdown then finds no idle connection with a request pending, and
//     waits for the requests in progress.
type connTracker struct {
	mu      sync.Mutex
	conns   map[*trackedConn]struct{}
	closing bool
	until   time.Time // end of the grace, once closing
}

func newConnTracker() *connTracker {
	return &connTracker{conns: map[*trackedConn]struct{}{}}
}

// listen wraps ln so that the tracker sees every connection. Its Close may
// be called more than once (by beginClosing and by Shutdown).
func (t *connTracker) listen(ln net.Listener) net.Listener {
	return &trackedListener{Listener: ln, t: t}
}

// connState is the http.Server's ConnState hook.
func (t *connTracker) connState(c net.Conn, s http.ConnState) {
	tc, ok := c.(*trackedConn)
	if !ok {
		return
	}
	switch s {
	case http.StateIdle:
		tc.mu.Lock()
		tc.idleNext = true // the server's next SetReadDeadline is the idle one
		tc.mu.Unlock()
	case http.StateHijacked, http.StateClosed:
		t.mu.Lock()
		delete(t.conns, tc)
		t.mu.Unlock()
	}
}

// isClosing says whether responses must close their connection.
func (t *connTracker) isClosing() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closing
}

// beginClosing is step 2: no new connections, every idle connection gets
// until the end of the grace to deliver a request. It returns that end.
func (t *connTracker) beginClosing(ln net.Listener) time.Time {
	_ = ln.Close()
	t.mu.Lock()
	t.closing = true
	t.until = time.Now().Add(idleGrace)
	conns := make([]*trackedConn, 0, len(t.conns))
	for c := range t.conns {
		conns = append(conns, c)
	}
	until := t.until
	t.mu.Unlock()
	for _, c := range conns {
		c.mu.Lock()
		if c.idleWait {
			_ = c.Conn.SetReadDeadline(until)
		}
		c.mu.Unlock()
	}
	return until
}

// closeConnections makes every response given once closing has begun
// close its connection.
func (t *connTracker) closeConnections(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if t.isClosing() {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}

type trackedListener struct {
	net.Listener
	t    *connTracker
	once sync.Once
	err  error
}

func (l *trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, t: l.t}
	l.t.mu.Lock()
	l.t.conns[tc] = struct{}{}
	l.t.mu.Unlock()
	return tc, nil
}

func (l *trackedListener) Close() error {
	l.once.Do(func() { l.err = l.Listener.Close() })
	return l.err
}

// trackedConn knows whether its server goroutine is waiting for the next
// request of a keep-alive connection (idleWait): the http.Server sets the
// idle read deadline right after reporting StateIdle, and the request's own
// deadlines once bytes of the request arrived.
type trackedConn struct {
	net.Conn
	mu       sync.Mutex
	idleNext bool
	idleWait bool
	t        *connTracker
}

func (c *trackedConn) SetReadDeadline(d time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idleNext {
		c.idleNext, c.idleWait = false, true
		if c.t != nil {
			if until, closing := c.t.graceEnd(); closing && (d.IsZero() || until.Before(d)) {
				d = until
			}
		}
	} else {
		c.idleWait = false
	}
	return c.Conn.SetReadDeadline(d)
}

func (t *connTracker) graceEnd() (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.until, t.closing
}
