package store

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
// The dispatcher (internal/infra/outbox) delivers it after the commit.
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
	// FAST PATH (docs/fast-path.md #8): the last write of every use case
	// that appends goes out with the COMMIT, in the same round trip, and
	// fails the commit if it fails (outside a transaction it runs at once).
	// occurred_at is now(), the transaction's start, either way.
	return wrap("outbox.append", r.db.AtCommit(func(db dbsqlc.DBTX) error { return r.q.OutboxInsert(ctx, db, p) }))
}
