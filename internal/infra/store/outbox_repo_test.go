package store_test

import (
	"testing"

	"github.com/ordersvc/ordersvc/internal/app"
)

// Outside a transaction Append inserts at once (in a transaction it rides
// with COMMIT: TestOutboxAppendCommitsWithTheTransaction); the event is
// stored pending with its JSON data.
func TestOutboxAppendOutsideATransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ev := app.Event{Type: app.EventStockAdjusted, AggregateID: mugID, Data: app.StockEventData{ProductID: mugID, Delta: -1, Stock: 9}}
	if err := b.repos.Outbox().Append(b.ctx, ev); err != nil {
		t.Fatal(err)
	}
	n := b.queryInt(`SELECT count(*) FROM outbox_events
		WHERE type = 'stock.adjusted' AND aggregate_id = $1 AND state = 'pending' AND (payload->>'delta')::int = -1`, mugID)
	if n != 1 {
		t.Errorf("%d events stored, want 1", n)
	}
}
