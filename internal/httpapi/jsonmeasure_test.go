package httpapi_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/ordersvc/ordersvc/internal/httpapi"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// BenchmarkJSONEncodersEndToEnd places a three-line order and reads it back
// through the real handler and database, once with the hand-written
// encoders and once with encoding/json, taking turns in every iteration.
func BenchmarkJSONEncodersEndToEnd(b *testing.B) {
	e := testkit.New(b)
	p1, p2, p3 := e.NewProduct(100, 1_000_000_000), e.NewProduct(200, 1_000_000_000), e.NewProduct(300, 1_000_000_000)
	c := e.NewActor("customer", 100_000_000_000)
	for i := range 200 {
		placeOrder(e, c.Token, fmt.Sprintf("warm-%d", i), p1, 1, p2, 2, p3, 3)
	}
	modes := []string{"hand", "encoding_json"}
	durs := map[string][]time.Duration{}
	i := 0
	for b.Loop() {
		for _, m := range modes {
			httpapi.SetHandWrittenJSON(m == "hand")
			i++
			t0 := time.Now()
			res := placeOrder(e, c.Token, fmt.Sprintf("k-%d", i), p1, 1, p2, 2, p3, 3)
			got := e.Do("GET", "/v1/orders/"+res.String("id"), c.Token, nil)
			durs[m] = append(durs[m], time.Since(t0))
			if res.Status != http.StatusCreated || got.Status != http.StatusOK {
				b.Fatalf("%d %d", res.Status, got.Status)
			}
		}
	}
	httpapi.SetHandWrittenJSON(true)
	med := map[string]float64{}
	for _, m := range modes {
		slices.Sort(durs[m])
		med[m] = float64(durs[m][len(durs[m])/2].Microseconds())
		b.ReportMetric(med[m], "µs-median/"+m)
	}
	b.ReportMetric(med["encoding_json"]/med["hand"], "ratio-std/hand")
}
