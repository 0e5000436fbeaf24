package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// BenchmarkReadsWithAReplica measures what a GET of one product costs
// through the real handler and database: on the primary alone
// (READ_DATABASE_URL unset: one round trip), through the replica reader with
// a caught-up replica (two: the primary's token check and WAL position, then
// the replica), and with the replica held behind (three: the replica's
// answer is refused and the primary reads). The three alternate in rounds
// within one run, so that a machine whose load changes weighs on each alike;
// compare the ratios, not the absolute figures:
//
//	go test -run '^$' -bench ReadsWithAReplica -benchtime 5x ./internal/httpapi/
//
// Each iteration is one round of 200 reads per mode. It needs the test
// server's standby (testkit.StandbyOf).
func BenchmarkReadsWithAReplica(b *testing.B) {
	primary := httpkit.New(b)
	replica := httpkit.New(b, testkit.Options{ReplicaReads: testkit.ReplicaWhenCurrent})
	onPrimary, onReplica := primary.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 5}), replica.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 5})
	const reads = 200
	read := func(e *httpkit.Env, id string) time.Duration {
		start := time.Now()
		for range reads {
			if got := e.Do("GET", "/v1/products/"+id, e.Staff.Token, nil); got.Status != http.StatusOK {
				b.Fatalf("GET: %d %s", got.Status, got.Body)
			}
		}
		return time.Since(start)
	}
	var tPrimary, tCurrent, tBehind time.Duration
	var answeredCurrent float64
	for b.Loop() {
		tPrimary += read(primary, onPrimary)
		replica.Standby.CatchUp(b)
		before := replica.Metric("ordersvc_replica_reads_total", "outcome", "replica")
		tCurrent += read(replica, onReplica)
		answeredCurrent += replica.Metric("ordersvc_replica_reads_total", "outcome", "replica") - before
		replica.Standby.Hold(b)
		tBehind += read(replica, onReplica)
	}
	n := float64(b.N * reads)
	b.ReportMetric(float64(tPrimary.Microseconds())/n, "µs/read-primary")
	b.ReportMetric(float64(tCurrent.Microseconds())/n, "µs/read-replica-current")
	b.ReportMetric(float64(tBehind.Microseconds())/n, "µs/read-replica-behind")
	b.ReportMetric(float64(tCurrent)/float64(tPrimary), "current/primary")
	b.ReportMetric(float64(tBehind)/float64(tPrimary), "behind/primary")
	b.ReportMetric(answeredCurrent/n, "replica-answered-share")
}
