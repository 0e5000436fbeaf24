package load

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// kind of request, for latency bookkeeping.
type kind int

// outcome of one request as a worker reports it.
type outcome struct {
	kind      kind
	status    int
	fresh     bool // a placement that created an order
	replay    bool
	read      bool
	bad       bool // not what the scenario expects
	transport bool
	example   string
}

// tally collects the outcomes of one worker; merged at the end.
type tally struct {
	requests, orders, replays, reads, bad, transport int64
	freshTotal, uncertain                            int64
	status                                           map[int]int
	hist, place, read                                *hdrhistogram.Histogram
	examples                                         []string
}

func newTally() *tally {
	return &tally{status: map[int]int{}, hist: newHist(), place: newHist(), read: newHist()}
}

func (t *tally) add(o outcome, lat time.Duration, measured bool) {
	if o.fresh {
		t.freshTotal++
	}
	if o.transport && o.kind == kPlace {
		t.uncertain++
	}
	if !measured {
		return
	}
	t.requests++
	if o.transport {
		t.transport++
	} else {
		t.status[o.status]++
	}
	if o.fresh {
		t.orders++
	}
	if o.replay {
		t.replays++
	}
	if o.read {
		t.reads++
	}
	if o.bad {
		t.bad++
		if len(t.examples) < 3 && o.example != "" {
			t.examples = append(t.examples, o.example)
		}
	}
	us := lat.Microseconds()
	if us < 1 {
		us = 1
	}
	_ = t.hist.RecordValue(us)
	if o.kind == kPlace {
		_ = t.place.RecordValue(us)
	} else {
		_ = t.read.RecordValue(us)
	}
}
