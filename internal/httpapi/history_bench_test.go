package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// BenchmarkPlacementByHistory places orders, one at a time through the real
// handler and database, for customers who already have 0, 10,000 and
// 100,000 orders, taking turns: each iteration places one order for each of
// them, so that whatever else the machine does hits all of them alike. It
// reports the median placement time of each (µs-median@N) and its ratio to
// the fresh customer's (ratio@N): the credit check must not grow with the
// history (ADR 0007). Run it with
//
//	TEST_DATABASE_URL=… go test -run '^$' -bench PlacementByHistory -benchtime 300x -count 3 ./internal/httpapi/
//
// The history is bulk-loaded in SQL, as the years of a real customer would
// be: nine in ten orders shipped and paid, the rest placed and unpaid or
// cancelled.
func BenchmarkPlacementByHistory(b *testing.B) {
	e := httpkit.New(b)
	product := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 1_000_000_000})
	warm := e.NewCustomer(100_000_000_000) // connections, prepared statements, caches
	for i := range 100 {
		e.PlaceOrder(warm.Token, fmt.Sprintf("warm-%d", i), testkit.Line(product, 1))
	}
	// The bulk load runs on a connection of its own, without the service's
	// statement timeout: on a busy machine 100,000 rows can take longer.
	ctx := context.Background()
	load, err := pgx.Connect(ctx, e.URL)
	if err != nil {
		b.Fatal(err)
	}
	defer load.Close(ctx)
	exec := func(sql string, args ...any) {
		b.Helper()
		if _, err := load.Exec(ctx, sql, args...); err != nil {
			b.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`SET statement_timeout = 0`)
	histories := []int{0, 10_000, 100_000}
	customers := make([]testkit.Actor, len(histories))
	for k, history := range histories {
		customers[k] = e.NewCustomer(100_000_000_000)
		exec(`INSERT INTO orders (id, customer_id, status, total_cents, paid_cents)
			SELECT gen_random_uuid(), $1, s.status, 1000, CASE WHEN s.status = 'shipped' THEN 1000 ELSE 0 END
			FROM generate_series(1, $2::int) i,
			     LATERAL (SELECT CASE WHEN i % 20 = 0 THEN 'placed' WHEN i % 20 = 1 THEN 'cancelled' ELSE 'shipped' END AS status) s`,
			customers[k].ID, history)
		exec(`UPDATE actors SET balance_cents = (SELECT coalesce(sum(total_cents - paid_cents), 0) FROM orders
			WHERE customer_id = $1 AND status IN ('placed', 'shipped')) WHERE id = $1`, customers[k].ID)
	}
	exec(`VACUUM ANALYZE`)
	took := make([][]time.Duration, len(histories))
	i := 0
	for b.Loop() {
		i++
		for k, c := range customers {
			start := time.Now()
			res := e.PlaceOrder(c.Token, fmt.Sprintf("bench-%d", i), testkit.Line(product, 1))
			took[k] = append(took[k], time.Since(start))
			if res.Status != http.StatusCreated {
				b.Fatalf("place: %d %s", res.Status, res.Body)
			}
		}
	}
	b.StopTimer()
	base := median(took[0])
	for k, history := range histories {
		m := median(took[k])
		b.ReportMetric(float64(m.Microseconds()), fmt.Sprintf("µs-median@%d", history))
		if k > 0 {
			b.ReportMetric(float64(m)/float64(base), fmt.Sprintf("ratio@%d", history))
		}
	}
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
