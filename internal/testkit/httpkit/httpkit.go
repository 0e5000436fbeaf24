// Package httpkit is the HTTP part of the test kit: the service's core
// (testkit.New) with the real HTTP handler on top, behind an httptest server,
// and a client for it. Only the tests of the HTTP API and of what runs
// through it (the binary, the faults, the outbox) import it; the tests of
// the use cases take testkit.New alone and never see HTTP. It is imported
// only by tests.
package httpkit

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ordersvc/ordersvc/internal/httpapi"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// Env is the service in process (testkit.Env) with its HTTP handler behind
// an httptest server.
type Env struct {
	*testkit.Env
	Server *httptest.Server
	Client *http.Client
}

// New starts the service on a fresh database, as testkit.New does, and
// serves its HTTP API.
func New(t testing.TB, opts ...testkit.Options) *Env {
	t.Helper()
	core := testkit.New(t, opts...)
	srv := httptest.NewServer(httpapi.NewServer(httpapi.Deps{
		Log: core.Log, Registry: core.Registry, Ready: core.Runner.Ping, App: core.App,
		RequestTimeout: core.Options.RequestTimeout,
	}))
	client := &http.Client{
		Timeout:   60 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 0, IdleConnTimeout: 30 * time.Second},
	}
	t.Cleanup(client.CloseIdleConnections)
	t.Cleanup(srv.Close)
	// Cleanups run last in, first out: held connections go on before the
	// server waits for the requests they hold.
	t.Cleanup(core.Hooks.ReleaseAll)
	return &Env{Env: core, Server: srv, Client: client}
}

// Response is a decoded HTTP response.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	JSON   map[string]any
	Err    error // a transport error; Status is 0 then
}

// String returns a top-level string member of the JSON body.
func (r *Response) String(name string) string {
	s, _ := r.JSON[name].(string)
	return s
}

// Int returns a top-level number member of the JSON body.
func (r *Response) Int(name string) int64 {
	f, _ := r.JSON[name].(float64)
	return int64(f)
}

// Code returns the problem code of an error response.
func (r *Response) Code() string { return r.String("code") }

// Do sends a request with a bearer token and a JSON body (nil for none).
// Extra headers come as name, value pairs. It never fails the test, so it is
// safe from many goroutines; check Response.Err.
func (e *Env) Do(method, path, token string, body any, headers ...string) *Response {
	return e.DoContext(context.Background(), method, path, token, body, headers...)
}

// DoContext is Do with a context.
func (e *Env) DoContext(ctx context.Context, method, path, token string, body any, headers ...string) *Response {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return &Response{Err: err}
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.Server.URL+path, rd)
	if err != nil {
		return &Response{Err: err}
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := e.Client.Do(req)
	if err != nil {
		return &Response{Err: err}
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	out := &Response{Status: res.StatusCode, Header: res.Header, Body: raw, Err: err}
	if len(raw) > 0 && raw[0] == '{' {
		_ = json.Unmarshal(raw, &out.JSON)
	}
	return out
}

// PlaceOrder posts an order of lines as token, with an Idempotency-Key.
func (e *Env) PlaceOrder(token, key string, lines ...testkit.OrderLine) *Response {
	return e.Do("POST", "/v1/orders", token, map[string]any{"lines": lines}, "Idempotency-Key", key)
}
