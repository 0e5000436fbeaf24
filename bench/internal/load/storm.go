package load

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"
)

// stormClients is how many clients send each key at once.
const stormClients = 8

// stormAnswer is what one member of a storm group got.
type stormAnswer struct {
	status   int
	replayed bool
	id       []byte
	err      error
	lat      time.Duration
}

// stormGroup is one key in flight: a lead worker that makes the request and
// keeps the tally, and stormClients members that send it at once.
type stormGroup struct {
	lead    *worker
	reqs    []chan []byte
	answers chan stormAnswer
}

// runStorm runs cfg.Concurrency groups; each group sends one fresh key from
// 8 connections at the same instant, waits for the 8 answers, checks them
// and moves to the next key. Exactly one of the 8 may execute; the other 7
// must replay its response (same order id), and the order must exist once.
func runStorm(ctx context.Context, cfg Config) ([]*tally, error) {
	now := time.Now()
	win := &window{start: now.Add(cfg.Warmup), end: now.Add(cfg.Warmup + cfg.Duration), open: cfg.OnMeasure}
	leads := make([]*worker, cfg.Concurrency)
	var wg sync.WaitGroup
	for g := range leads {
		grp := newStormGroup(cfg, g)
		leads[g] = grp.lead
		wg.Add(1)
		go func() {
			defer wg.Done()
			grp.run(ctx, win)
		}()
	}
	wg.Wait()
	win.close()
	for _, l := range leads {
		l.conn.Close()
	}
	return tallies(leads), ctx.Err()
}

// newStormGroup starts the members of group g, each on its own connection.
func newStormGroup(cfg Config, g int) *stormGroup {
	lead := newWorker(cfg, g, cfg.Customers[g%len(cfg.Customers)])
	grp := &stormGroup{lead: lead, reqs: make([]chan []byte, stormClients), answers: make(chan stormAnswer, stormClients)}
	for m := range stormClients {
		member := newWorker(cfg, g*stormClients+m, lead.customer)
		grp.reqs[m] = make(chan []byte)
		go func() {
			defer member.conn.Close()
			for req := range grp.reqs[m] {
				start := time.Now()
				res, err := member.conn.Do(req)
				a := stormAnswer{status: res.Status, replayed: res.Replayed, err: err, lat: time.Since(start)}
				if id, ok := orderID(res.Body); ok {
					a.id = []byte(id)
				}
				grp.answers <- a
			}
		}()
	}
	return grp
}

// run sends fresh keys until the window closes, then stops the members.
func (grp *stormGroup) run(ctx context.Context, win *window) {
	defer func() {
		for _, r := range grp.reqs {
			close(r)
		}
	}()
	for ctx.Err() == nil {
		measured, done := win.tick(time.Now())
		if done {
			break
		}
		req := append([]byte(nil), grp.lead.placeSpread()...)
		for _, r := range grp.reqs {
			r <- req
		}
		got := make([]stormAnswer, 0, stormClients)
		for range stormClients {
			got = append(got, <-grp.answers)
		}
		grp.judge(got, measured)
	}
	win.close()
}

// judge tallies one key's answers: all 201, one fresh, one order id.
func (grp *stormGroup) judge(got []stormAnswer, measured bool) {
	t := grp.lead.t
	fresh := 0
	var first []byte
	for _, a := range got {
		o := outcome{kind: kPlace, status: a.status, replay: a.replayed}
		switch {
		case a.err != nil:
			o.transport, o.bad, o.example = true, true, a.err.Error()
		case a.status != 201:
			o.bad, o.example = true, fmt.Sprintf("storm: %d", a.status)
		case !a.replayed:
			fresh++
			o.fresh = true
		}
		if a.err == nil && a.status == 201 {
			if first == nil {
				first = a.id
			} else if !bytes.Equal(first, a.id) {
				o.bad, o.example = true, fmt.Sprintf("storm: one key answered two order ids %s and %s", first, a.id)
			}
		}
		t.add(o, a.lat, measured)
	}
	if fresh > 1 {
		t.bad++
		t.examples = append(t.examples, fmt.Sprintf("storm: one key executed %d times", fresh))
	}
}
