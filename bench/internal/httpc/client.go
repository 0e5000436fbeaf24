// Package httpc is a minimal HTTP/1.1 client for the load generator: one
// keep-alive connection per worker, requests written from a reused buffer,
// responses parsed just far enough to get the status, the headers the
// benchmark checks and the body. It costs a small fraction of net/http's CPU
// per request, which matters on a small machine where the generator shares
// the cores with the service and the database.
package httpc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// Conn is one keep-alive connection. It is not safe for concurrent use.
type Conn struct {
	addr    string
	timeout time.Duration
	c       net.Conn
	br      *bufio.Reader
	body    []byte
}

// Response is the part of a response the benchmark looks at. Body is valid
// until the next request on the connection.
type Response struct {
	Status   int
	Replayed bool // Idempotent-Replayed: true
	Body     []byte
}

// Dial returns a connection to addr (host:port) that redials on demand.
func Dial(addr string, timeout time.Duration) *Conn {
	return &Conn{addr: addr, timeout: timeout}
}

// Close closes the connection.
func (c *Conn) Close() {
	if c.c != nil {
		_ = c.c.Close()
		c.c = nil
	}
}

// Do writes one complete, pre-serialized request and reads its response. A
// broken keep-alive connection is redialled once when nothing was read yet.
func (c *Conn) Do(req []byte) (Response, error) {
	for attempt := 0; ; attempt++ {
		fresh := false
		if c.c == nil {
			conn, err := net.DialTimeout("tcp", c.addr, c.timeout)
			if err != nil {
				return Response{}, err
			}
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetNoDelay(true)
			}
			c.c = conn
			if c.br == nil {
				c.br = bufio.NewReaderSize(conn, 16<<10)
			} else {
				c.br.Reset(conn)
			}
			fresh = true
		}
		if c.timeout > 0 {
			_ = c.c.SetDeadline(time.Now().Add(c.timeout))
		}
		res, n, err := c.roundTrip(req)
		if err == nil {
			return res, nil
		}
		c.Close()
		if fresh || attempt > 0 || n > 0 {
			return Response{}, err
		}
	}
}

func (c *Conn) roundTrip(req []byte) (Response, int, error) {
	if _, err := c.c.Write(req); err != nil {
		return Response{}, 0, err
	}
	var res Response
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return res, len(line), err
	}
	// HTTP/1.1 201 Created
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return res, len(line), fmt.Errorf("bad status line %q", line)
	}
	res.Status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return res, len(line), fmt.Errorf("bad status line %q", line)
	}
	h, err := c.readHeaders(&res)
	if err != nil {
		return res, 1, err
	}
	c.body = c.body[:0]
	switch {
	case h.chunked:
		err = c.readChunked()
	case h.length >= 0:
		c.body, err = readN(c.br, c.body, h.length)
	case res.Status == 204 || res.Status == 304:
	default:
		err = errors.New("response without length")
	}
	if err != nil {
		return res, 1, err
	}
	res.Body = c.body
	if h.closing {
		c.Close()
	}
	return res, 1, nil
}

// framing is what the headers say about the body and the connection.
type framing struct {
	length           int // -1: not given
	chunked, closing bool
}

// readHeaders reads the header block up to its empty line, noting the
// framing and Idempotent-Replayed.
func (c *Conn) readHeaders(res *Response) (framing, error) {
	f := framing{length: -1}
	for {
		h, err := c.br.ReadSlice('\n')
		if err != nil {
			return f, err
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			return f, nil
		}
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			continue
		}
		value = bytes.TrimSpace(value)
		switch {
		case asciiEqualFold(name, "Content-Length"):
			f.length, err = strconv.Atoi(string(value))
			if err != nil {
				return f, fmt.Errorf("bad Content-Length %q", value)
			}
		case asciiEqualFold(name, "Transfer-Encoding"):
			f.chunked = asciiEqualFold(value, "chunked")
		case asciiEqualFold(name, "Connection"):
			f.closing = asciiEqualFold(value, "close")
		case asciiEqualFold(name, "Idempotent-Replayed"):
			res.Replayed = asciiEqualFold(value, "true")
		}
	}
}

// readChunked reads a chunked body into c.body, trailers skipped.
func (c *Conn) readChunked() error {
	for {
		l, err := c.br.ReadSlice('\n')
		if err != nil {
			return err
		}
		size, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.SplitN(l, []byte(";"), 2)[0])), 16, 64)
		if err != nil {
			return fmt.Errorf("bad chunk size %q", l)
		}
		if size == 0 {
			return c.skipTrailers()
		}
		if c.body, err = readN(c.br, c.body, int(size)); err != nil {
			return err
		}
		if _, err := c.br.Discard(2); err != nil {
			return err
		}
	}
}

func (c *Conn) skipTrailers() error {
	for {
		t, err := c.br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(bytes.TrimRight(t, "\r\n")) == 0 {
			return nil
		}
	}
}

func readN(r io.Reader, buf []byte, n int) ([]byte, error) {
	start := len(buf)
	if cap(buf)-start < n {
		nb := make([]byte, start, start+n+512)
		copy(nb, buf)
		buf = nb
	}
	buf = buf[:start+n]
	_, err := io.ReadFull(r, buf[start:])
	return buf, err
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// Request appends a serialized HTTP/1.1 request to dst.
func Request(dst []byte, method, path, host string, headers [][2]string, body []byte) []byte {
	dst = append(dst, method...)
	dst = append(dst, ' ')
	dst = append(dst, path...)
	dst = append(dst, " HTTP/1.1\r\nHost: "...)
	dst = append(dst, host...)
	dst = append(dst, "\r\n"...)
	for _, h := range headers {
		dst = append(dst, h[0]...)
		dst = append(dst, ": "...)
		dst = append(dst, h[1]...)
		dst = append(dst, "\r\n"...)
	}
	if body != nil {
		dst = append(dst, "Content-Type: application/json\r\nContent-Length: "...)
		dst = strconv.AppendInt(dst, int64(len(body)), 10)
		dst = append(dst, "\r\n"...)
	}
	dst = append(dst, "\r\n"...)
	return append(dst, body...)
}
