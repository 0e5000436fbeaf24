package testkit

import (
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a target. Stop cuts every connection and
// refuses new ones, as a stopped database server would; Start listens again
// on the same address. Tests put it between the service and PostgreSQL.
//
// It reads the PostgreSQL protocol as it forwards it, so that CutAtCommit
// can cut a connection exactly at a COMMIT: just before it is sent, or just
// after the server has executed it, dropping its answer.
type Proxy struct {
	t      testing.TB
	target string
	addr   string

	mu      sync.Mutex
	ln      net.Listener
	conns   map[net.Conn]struct{}
	cut     Cut
	cutDone chan struct{}
}

// Cut is where CutAtCommit cuts a connection.
type Cut int

const (
	// BeforeCommit: the statements before COMMIT reach the server, COMMIT
	// never does; the server sees the connection close and rolls back.
	BeforeCommit Cut = iota + 1
	// AfterCommit: COMMIT reaches the server and is executed; its answer
	// (CommandComplete "COMMIT") is dropped and the connection closed, so
	// the client cannot know that it committed.
	AfterCommit
)

// CutAtCommit arms the proxy: the next COMMIT that any connection sends is
// cut as c says, once. The returned channel is closed when it happened.
func (p *Proxy) CutAtCommit(c Cut) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut, p.cutDone = c, make(chan struct{})
	return p.cutDone
}

// takeCut disarms the proxy if it is armed with c, and returns its channel.
func (p *Proxy) takeCut(c Cut) chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut != c {
		return nil
	}
	done := p.cutDone
	p.cut, p.cutDone = 0, nil
	return done
}

// NewProxy starts a proxy to target (host:port) on a free loopback port.
func NewProxy(t testing.TB, target string) *Proxy {
	p := &Proxy{t: t, target: target, addr: "127.0.0.1:0", conns: map[net.Conn]struct{}{}}
	p.Start()
	t.Cleanup(p.Stop)
	return p
}

// Addr is the proxy's listening address.
func (p *Proxy) Addr() string { return p.addr }

// Start accepts connections again.
func (p *Proxy) Start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("proxy listen on %s: %v", p.addr, err)
	}
	p.ln, p.addr = ln, ln.Addr().String()
	go p.accept(ln)
}

// Stop closes the listener and every open connection.
func (p *Proxy) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

func (p *Proxy) accept(ln net.Listener) {
	for {
		in, err := ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		if p.ln != ln { // stopped meanwhile
			p.mu.Unlock()
			_ = in.Close()
			_ = out.Close()
			return
		}
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go p.link(in, out)
	}
}

// Via returns the connection string u with its host and port replaced by
// the proxy's.
func (p *Proxy) Via(u string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		p.t.Fatalf("parse %s: %v", u, err)
	}
	parsed.Host = p.addr
	return parsed.String()
}

// HostPort returns the host:port of a connection string.
func HostPort(t testing.TB, u string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatalf("parse %s: %v", u, err)
	}
	if parsed.Port() == "" {
		return parsed.Hostname() + ":5432"
	}
	return parsed.Host
}
