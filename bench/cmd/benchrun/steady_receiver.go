package main

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// receiver is the local webhook: it answers 204 after delay and records
// when the first and the last delivery arrived.
type receiver struct {
	srv         *http.Server
	url         string
	delay       atomic.Int64 // nanoseconds
	count       atomic.Int64
	mu          sync.Mutex
	first, last time.Time
}

func startReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{url: "http://" + ln.Addr().String() + "/events"}
	r.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		buf := make([]byte, 4096)
		for {
			if _, err := req.Body.Read(buf); err != nil {
				break
			}
		}
		if d := time.Duration(r.delay.Load()); d > 0 {
			time.Sleep(d)
		}
		now := time.Now()
		r.mu.Lock()
		if r.first.IsZero() {
			r.first = now
		}
		r.last = now
		r.mu.Unlock()
		r.count.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *receiver) reset(delay time.Duration) {
	r.delay.Store(int64(delay))
	r.count.Store(0)
	r.mu.Lock()
	r.first, r.last = time.Time{}, time.Time{}
	r.mu.Unlock()
}

func (r *receiver) span() (first, last time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.first, r.last
}
