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

// runStorm runs cfg.Concurrency groups; each group sends one fresh key from
// 8 connections at the same instant, waits for the 8 answers, checks them
// and moves to the next key. Exactly one of the 8 may execute; the other 7
// must replay its response (same order id), and the order must exist once.
func runStorm(ctx context.Context, cfg Config) ([]*tally, error) {
	type answer struct {
		status   int
		replayed bool
		id       []byte
		err      error
		lat      time.Duration
	}
	now := time.Now()
	win := &window{start: now.Add(cfg.Warmup), end: now.Add(cfg.Warmup + cfg.Duration), open: cfg.OnMeasure}
	groups := make([]*worker, cfg.Concurrency)
	var wg sync.WaitGroup
	for g := range groups {
		lead := newWorker(cfg, g, cfg.Customers[g%len(cfg.Customers)])
		groups[g] = lead
		members := make([]*worker, stormClients)
		reqs := make([]chan []byte, stormClients)
		answers := make(chan answer, stormClients)
		for m := range members {
			members[m] = newWorker(cfg, g*stormClients+m, lead.customer)
			reqs[m] = make(chan []byte)
			go func() {
				defer members[m].conn.Close()
				for req := range reqs[m] {
					start := time.Now()
					res, err := members[m].conn.Do(req)
					a := answer{status: res.Status, replayed: res.Replayed, err: err, lat: time.Since(start)}
					if id, ok := orderID(res.Body); ok {
						a.id = []byte(id)
					}
					answers <- a
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				for _, r := range reqs {
					close(r)
				}
			}()
			for ctx.Err() == nil {
				measured, done := win.tick(time.Now())
				if done {
					break
				}
				req := append([]byte(nil), lead.placeSpread()...)
				for _, r := range reqs {
					r <- req
				}
				fresh := 0
				var first []byte
				got := make([]answer, 0, stormClients)
				for range stormClients {
					a := <-answers
					got = append(got, a)
				}
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
					lead.t.add(o, a.lat, measured)
				}
				if fresh > 1 {
					lead.t.bad++
					lead.t.examples = append(lead.t.examples, fmt.Sprintf("storm: one key executed %d times", fresh))
				}
			}
			win.close()
		}()
	}
	wg.Wait()
	win.close()
	for _, g := range groups {
		g.conn.Close()
	}
	return tallies(groups), ctx.Err()
}
