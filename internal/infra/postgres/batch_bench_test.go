package postgres

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

// BenchmarkBatchQueue is what batch adds in CPU to each batched statement:
// the first run of its generated call, on the queueing DBTX (here the two
// statements of an order read). A round trip costs tens of microseconds.
func BenchmarkBatchQueue(b *testing.B) {
	ctx := context.Background()
	id := uuid.New()
	b.ReportAllocs()
	for b.Loop() {
		var bt Batch
		bt.Add(func(db dbsqlc.DBTX) error {
			_, err := queries.OrderGet(ctx, db, id)
			return err
		})
		bt.Add(func(db dbsqlc.DBTX) error {
			_, err := queries.OrderLinesGet(ctx, db, []uuid.UUID{id})
			return err
		})
		if bt.err != nil {
			b.Fatal(bt.err)
		}
	}
}
