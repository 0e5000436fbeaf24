package load

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/ordersvc/ordersvc/bench/internal/httpc"
)

// worker sends one scenario's requests on one connection.
type worker struct {
	cfg      Config
	id       int
	customer Actor
	auth     string
	conn     *httpc.Conn
	rng      *rand.Rand
	t        *tally
	seq      int64
	buf      []byte
	body     []byte
	saved    [][]byte // replay: completed requests to send again
	orders   []string // mixed: ids of this worker's orders
	pick     []int
}

func newWorker(cfg Config, id int, c Actor) *worker {
	addr := cfg.Addr
	if len(cfg.Addrs) > 0 {
		addr = cfg.Addrs[id%len(cfg.Addrs)]
	}
	return &worker{
		cfg: cfg, id: id, customer: c, auth: "Bearer " + c.Token,
		conn: httpc.Dial(addr, cfg.Timeout),
		rng:  rand.New(rand.NewPCG(cfg.Seed+uint64(id)*7919, uint64(time.Now().UnixNano()))),
		t:    newTally(),
		buf:  make([]byte, 0, 1024), body: make([]byte, 0, 512), pick: make([]int, 0, 3),
	}
}

const prepOrders = 50

func (w *worker) prepare(ctx context.Context) error {
	switch w.cfg.Scenario {
	case "replay", "mixed", "read":
		n := prepOrders
		if w.cfg.Scenario != "replay" {
			n = 20
		}
		for i := 0; i < n && ctx.Err() == nil; i++ {
			req := w.placeSpread()
			res, err := w.conn.Do(req)
			if err != nil {
				return fmt.Errorf("prepare %s: %w", w.cfg.Scenario, err)
			}
			if res.Status != 201 || res.Replayed {
				return fmt.Errorf("prepare %s: placement answered %d %s", w.cfg.Scenario, res.Status, res.Body)
			}
			w.t.freshTotal++
			if w.cfg.Scenario == "replay" {
				w.saved = append(w.saved, append([]byte(nil), req...))
			} else if id, ok := orderID(res.Body); ok {
				w.orders = append(w.orders, id)
			}
		}
	}
	return ctx.Err()
}

// next sends the scenario's next request and classifies the response.
func (w *worker) next() outcome {
	switch w.cfg.Scenario {
	case "spread", "nokeys", "dispatch":
		return w.place(w.placeSpread())
	case "hot":
		return w.place(w.placeHot())
	case "replay":
		req := w.saved[w.seq%int64(len(w.saved))]
		w.seq++
		res, err := w.conn.Do(req)
		if err != nil {
			return outcome{kind: kPlace, transport: true, bad: true, example: err.Error()}
		}
		o := outcome{kind: kPlace, status: res.Status, replay: res.Replayed}
		if res.Status != 201 || !res.Replayed {
			o.bad = true
			o.fresh = res.Status == 201
			o.example = fmt.Sprintf("replay: %d replayed=%v %.200s", res.Status, res.Replayed, res.Body)
		}
		return o
	case "read":
		w.seq++
		return w.get("/v1/orders/" + w.orders[w.seq%int64(len(w.orders))])
	case "livez":
		return w.get("/livez")
	case "mixed":
		r := w.rng.IntN(10)
		switch {
		case r < 2:
			o := w.place(w.placeSpread())
			return o
		case r < 6 && len(w.orders) > 0:
			return w.get("/v1/orders/" + w.orders[w.rng.IntN(len(w.orders))])
		default:
			return w.get("/v1/products/" + w.cfg.Products[w.rng.IntN(len(w.cfg.Products))])
		}
	}
	panic("unreachable")
}

func (w *worker) place(req []byte) outcome {
	res, err := w.conn.Do(req)
	if err != nil {
		return outcome{kind: kPlace, transport: true, bad: true, example: err.Error()}
	}
	o := outcome{kind: kPlace, status: res.Status, replay: res.Replayed, fresh: res.Status == 201 && !res.Replayed}
	if !o.fresh {
		o.bad = true
		o.example = fmt.Sprintf("place: %d replayed=%v %.200s", res.Status, res.Replayed, res.Body)
	}
	if o.fresh && w.cfg.Scenario == "mixed" && len(w.orders) < 1000 {
		if id, ok := orderID(res.Body); ok {
			w.orders = append(w.orders, id)
		}
	}
	return o
}

func (w *worker) get(path string) outcome {
	w.buf = w.buf[:0]
	w.buf = append(w.buf, "GET "...)
	w.buf = append(w.buf, path...)
	w.buf = append(w.buf, " HTTP/1.1\r\nHost: bench\r\nAuthorization: "...)
	w.buf = append(w.buf, w.auth...)
	w.buf = append(w.buf, "\r\n\r\n"...)
	res, err := w.conn.Do(w.buf)
	if err != nil {
		return outcome{kind: kRead, transport: true, bad: true, example: err.Error()}
	}
	o := outcome{kind: kRead, status: res.Status, read: res.Status == 200}
	if res.Status != 200 {
		o.bad = true
		o.example = fmt.Sprintf("GET %s: %d %.200s", path, res.Status, res.Body)
	}
	return o
}

// placeSpread builds an order of 1 to 3 distinct products, 1 to 3 each.
func (w *worker) placeSpread() []byte {
	n := 1 + w.rng.IntN(3)
	w.pick = w.pick[:0]
	for len(w.pick) < n {
		p := w.rng.IntN(len(w.cfg.Products))
		dup := false
		for _, q := range w.pick {
			dup = dup || q == p
		}
		if !dup {
			w.pick = append(w.pick, p)
		}
	}
	w.body = append(w.body[:0], `{"lines":[`...)
	for i, p := range w.pick {
		if i > 0 {
			w.body = append(w.body, ',')
		}
		w.body = append(w.body, `{"product_id":"`...)
		w.body = append(w.body, w.cfg.Products[p]...)
		w.body = append(w.body, `","quantity":`...)
		w.body = strconv.AppendInt(w.body, int64(1+w.rng.IntN(3)), 10)
		w.body = append(w.body, '}')
	}
	w.body = append(w.body, "]}"...)
	return w.placeRequest()
}

// placeHot orders the first hot product, or both, one unit each.
func (w *worker) placeHot() []byte {
	w.body = append(w.body[:0], `{"lines":[{"product_id":"`...)
	w.body = append(w.body, w.cfg.Hot[0]...)
	w.body = append(w.body, `","quantity":1}`...)
	if w.rng.IntN(2) == 1 {
		w.body = append(w.body, `,{"product_id":"`...)
		w.body = append(w.body, w.cfg.Hot[1]...)
		w.body = append(w.body, `","quantity":1}`...)
	}
	w.body = append(w.body, "]}"...)
	return w.placeRequest()
}

// placeRequest wraps w.body in a POST /v1/orders with a fresh key.
func (w *worker) placeRequest() []byte {
	w.seq++
	b := w.buf[:0]
	b = append(b, "POST /v1/orders HTTP/1.1\r\nHost: bench\r\nAuthorization: "...)
	b = append(b, w.auth...)
	b = append(b, "\r\nIdempotency-Key: "...)
	b = w.key(b)
	b = append(b, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(w.body)), 10)
	b = append(b, "\r\n\r\n"...)
	b = append(b, w.body...)
	w.buf = b
	return b
}

func (w *worker) key(b []byte) []byte {
	b = append(b, w.cfg.RunID...)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(w.id), 10)
	b = append(b, '-')
	return strconv.AppendInt(b, w.seq, 10)
}

// orderID reads the id from an order body, which starts {"id":"<uuid>".
func orderID(body []byte) (string, bool) {
	const prefix = `{"id":"`
	if len(body) < len(prefix)+36 || string(body[:len(prefix)]) != prefix {
		return "", false
	}
	return string(body[len(prefix) : len(prefix)+36]), true
}
