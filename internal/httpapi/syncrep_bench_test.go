package httpapi_test

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// BenchmarkPlacementSyncReplication measures what synchronous replication
// costs a placement: 16 clients place orders through the real handler on a
// primary with a synchronous standby (every COMMIT waits for the standby's
// flush), and on the same primary alone (standby stopped,
// synchronous_standby_names empty), taking turns within each iteration so
// that whatever else the machine does hits both alike. It reports the
// placements per second of each, their ratio (sync/single) and each p99.
// The servers are local (testkit.StartReplication), so the standby's round
// trip is a loopback one: on a network the cost grows by its latency.
//
//	go test -run '^$' -bench PlacementSyncReplication -benchtime 3x ./internal/httpapi/
func BenchmarkPlacementSyncReplication(b *testing.B) {
	rep := testkit.StartReplication(b, true)
	e := httpkit.New(b, testkit.Options{DatabaseURL: rep.MultiHostURL()})
	product := e.NewProduct(testkit.ProductSpec{PriceCents: 1, Stock: 1_000_000_000})
	customer := e.NewCustomer(100_000_000_000)
	const clients, perClient = 16, 40
	standbyUp := true
	setMode := func(sync bool) {
		if sync {
			if !standbyUp {
				rep.Standby.Start()
				standbyUp = true
			}
			rep.Primary.WaitFor("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'", 1)
			rep.Primary.Exec("ALTER SYSTEM SET synchronous_standby_names = '*'")
			rep.Primary.Exec("SELECT pg_reload_conf()")
			rep.Primary.WaitFor("SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'", 1)
			return
		}
		rep.Primary.Exec("ALTER SYSTEM SET synchronous_standby_names = ''")
		rep.Primary.Exec("SELECT pg_reload_conf()")
		rep.Standby.Stop()
		standbyUp = false
	}
	round := 0
	run := func() (time.Duration, []time.Duration) {
		round++
		var mu sync.Mutex
		var lat []time.Duration
		start := time.Now()
		testkit.Race(clients, func(c int) {
			for n := range perClient {
				t0 := time.Now()
				res := e.PlaceOrder(customer.Token, fmt.Sprintf("r%d-c%d-%d", round, c, n), testkit.Line(product, 1))
				if res.Status != http.StatusCreated {
					b.Errorf("place: %d %s", res.Status, res.Body)
					return
				}
				mu.Lock()
				lat = append(lat, time.Since(t0))
				mu.Unlock()
			}
		})
		return time.Since(start), lat
	}
	modes := []struct {
		name string
		sync bool
	}{{"single", false}, {"sync", true}}
	took := make([]time.Duration, len(modes))
	lats := make([][]time.Duration, len(modes))
	setMode(true)
	run() // warm: connections, prepared statements, caches
	for b.Loop() {
		for k, m := range modes {
			setMode(m.sync)
			d, l := run()
			took[k] += d
			lats[k] = append(lats[k], l...)
		}
	}
	b.StopTimer()
	rate := make([]float64, len(modes))
	for k, m := range modes {
		rate[k] = float64(len(lats[k])) / took[k].Seconds()
		slices.Sort(lats[k])
		p99 := lats[k][min(len(lats[k])-1, len(lats[k])*99/100)]
		b.ReportMetric(rate[k], "placements/s-"+m.name)
		b.ReportMetric(float64(p99.Milliseconds()), "p99-ms-"+m.name)
	}
	b.ReportMetric(rate[1]/rate[0], "ratio-sync/single")
}
