package infra

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

// outboxRepo implements app.OutboxRepo: it inserts the event in the
// use case's transaction, so that it commits or rolls back with the change
// it reports.
// The dispatcher (outbox.go) delivers it after the commit.
type outboxRepo struct{ *repositories }

func (r outboxRepo) Append(ctx context.Context, e app.Event) error {
	payload, err := json.Marshal(e.Data)
	if err != nil {
		return fmt.Errorf("encode %s event: %w", e.Type, err)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return err
	}
	p := dbsqlc.OutboxInsertParams{ID: id, Type: e.Type.String(), AggregateID: e.AggregateID, Payload: payload}
	if tx, ok := r.db.(*pipe); ok && tx.inTx() {
		// The last write of every use case that appends: it goes out with
		// the COMMIT, in the same round trip, and fails the commit if it
		// fails. occurred_at is now(), the transaction's start, either way.
		tx.atCommit(func(db dbsqlc.DBTX) error { return r.q.OutboxInsert(ctx, db, p) })
		return nil
	}
	return translate(r.q.OutboxInsert(ctx, r.db, p))
}
