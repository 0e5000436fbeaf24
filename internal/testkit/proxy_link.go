package testkit

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
)

// link forwards one client connection, message by message once the startup
// is done. A client that asks for TLS or GSS encryption is forwarded as raw
// bytes, without cuts.
func (p *Proxy) link(client, server net.Conn) {
	cr := bufio.NewReader(client)
	startup, err := readUntyped(cr)
	if err != nil || writeAll(server, startup) != nil {
		p.close(client, server)
		return
	}
	if code := binary.BigEndian.Uint32(startup[4:8]); code == 80877103 || code == 80877104 {
		go p.pipe(client, server)
		p.pipe(server, readerConn{Conn: client, r: cr})
		return
	}
	l := &pgLink{p: p, client: client, server: server, stmts: map[string]bool{}}
	go l.fromServer(bufio.NewReader(server))
	l.fromClient(cr)
}

// readerConn is a connection read through a buffered reader.
type readerConn struct {
	net.Conn
	r io.Reader
}

func (c readerConn) Read(b []byte) (int, error) { return c.r.Read(b) }

func (p *Proxy) close(conns ...net.Conn) {
	for _, c := range conns {
		_ = c.Close()
	}
	p.mu.Lock()
	for _, c := range conns {
		delete(p.conns, c)
	}
	p.mu.Unlock()
}

// pgLink is one client connection and its server connection.
type pgLink struct {
	p              *Proxy
	client, server net.Conn

	mu sync.Mutex
	// stmts says which prepared statements (by name) are a COMMIT.
	stmts map[string]bool
	// committing is closed by the client side once a COMMIT to cut after
	// went to the server.
	committing chan struct{}
}

func isCommit(sql string) bool {
	sql = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(sql), ";"))
	return strings.EqualFold(sql, "commit") || strings.EqualFold(sql, "end")
}

func (l *pgLink) fromClient(r *bufio.Reader) {
	defer l.p.close(l.client, l.server)
	for {
		msg, err := readTyped(r)
		if err != nil {
			return
		}
		commit := false
		body := msg[5:]
		switch msg[0] {
		case 'P': // Parse: name, query, …
			name, rest := cstring(body)
			query, _ := cstring(rest)
			l.mu.Lock()
			l.stmts[name] = isCommit(query)
			l.mu.Unlock()
		case 'B': // Bind: portal, statement, …
			_, rest := cstring(body)
			name, _ := cstring(rest)
			l.mu.Lock()
			commit = l.stmts[name]
			l.mu.Unlock()
		case 'Q': // Query: query
			query, _ := cstring(body)
			commit = isCommit(query)
		}
		if commit {
			if done := l.p.takeCut(BeforeCommit); done != nil {
				l.p.close(l.client, l.server)
				close(done)
				return
			}
			if done := l.p.takeCut(AfterCommit); done != nil {
				l.mu.Lock()
				l.committing = done
				l.mu.Unlock()
			}
		}
		if writeAll(l.server, msg) != nil {
			return
		}
	}
}

func (l *pgLink) fromServer(r *bufio.Reader) {
	defer l.p.close(l.client, l.server)
	for {
		msg, err := readTyped(r)
		if err != nil {
			return
		}
		if msg[0] == 'C' { // CommandComplete: tag
			tag, _ := cstring(msg[5:])
			l.mu.Lock()
			done := l.committing
			l.mu.Unlock()
			if done != nil && (tag == "COMMIT" || tag == "ROLLBACK") {
				l.p.close(l.client, l.server)
				close(done)
				return
			}
		}
		if writeAll(l.client, msg) != nil {
			return
		}
	}
}

// readUntyped reads a startup-phase message: length, then body.
func readUntyped(r *bufio.Reader) ([]byte, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(head[:])
	if n < 8 || n > 1<<20 {
		return nil, errors.New("bad startup message length")
	}
	msg := make([]byte, n)
	copy(msg, head[:])
	_, err := io.ReadFull(r, msg[4:])
	return msg, err
}

// readTyped reads a message: type byte, length, then body.
func readTyped(r *bufio.Reader) ([]byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n < 4 || n > 1<<30 {
		return nil, errors.New("bad message length")
	}
	msg := make([]byte, 1+n)
	copy(msg, head[:])
	_, err := io.ReadFull(r, msg[5:])
	return msg, err
}

// cstring splits a NUL-terminated string off b.
func cstring(b []byte) (string, []byte) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return string(b), nil
	}
	return string(b[:i]), b[i+1:]
}

func writeAll(w io.Writer, b []byte) error {
	_, err := w.Write(b)
	return err
}

func (p *Proxy) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	p.close(dst, src)
}
