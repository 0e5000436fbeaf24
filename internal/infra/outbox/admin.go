package outbox

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
)

// OutboxAdmin backs the `api outbox` command: listing and requeueing dead
// events.
type OutboxAdmin struct {
	db dbsqlc.DBTX
	q  *dbsqlc.Queries
}

// NewOutboxAdmin returns the admin operations on db (a pool).
func NewOutboxAdmin(db dbsqlc.DBTX) OutboxAdmin { return OutboxAdmin{db: db, q: dbsqlc.New()} }

// DeadEvent is a dead outbox event as `api outbox dead` prints it.
type DeadEvent struct {
	ID          uuid.UUID       `json:"id"`
	Type        string          `json:"type"`
	AggregateID uuid.UUID       `json:"aggregate_id"`
	OccurredAt  time.Time       `json:"occurred_at"`
	Attempts    int             `json:"attempts"`
	LastError   string          `json:"last_error"`
	Data        json.RawMessage `json:"data"`
}

// Dead returns up to limit dead events with ids after after, in id order.
func (a OutboxAdmin) Dead(ctx context.Context, after uuid.UUID, limit int) ([]DeadEvent, error) {
	rows, err := a.q.OutboxListDead(ctx, a.db, dbsqlc.OutboxListDeadParams{After: after, RowLimit: int32(limit)})
	if err != nil {
		return nil, postgres.Translate(err)
	}
	out := make([]DeadEvent, len(rows))
	for i, r := range rows {
		out[i] = DeadEvent{ID: r.ID, Type: r.Type, AggregateID: r.AggregateID, OccurredAt: r.OccurredAt.UTC(),
			Attempts: int(r.Attempts), LastError: r.LastError.String, Data: r.Payload}
	}
	return out, nil
}

// Requeue makes one dead event deliverable again: pending, due now, with its
// attempts reset. It reports whether id named a dead event.
func (a OutboxAdmin) Requeue(ctx context.Context, id uuid.UUID) (bool, error) {
	n, err := a.q.OutboxRequeue(ctx, a.db, id)
	return n == 1, postgres.Translate(err)
}

// RequeueAll requeues every dead event and returns how many.
func (a OutboxAdmin) RequeueAll(ctx context.Context) (int64, error) {
	n, err := a.q.OutboxRequeueAll(ctx, a.db)
	return n, postgres.Translate(err)
}
