package outbox

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// UnfenceMark makes d mark accepted events delivered by id alone, without
// the claim fence: the naive variant that TestBatchMarkIsFencedByClaim must
// catch.
func UnfenceMark(d *Dispatcher) {
	d.mark = func(ctx context.Context, ids []uuid.UUID, _ pgtype.Timestamptz) (int64, error) {
		tag, err := d.pool.Exec(ctx, `UPDATE outbox_events SET state = 'delivered', delivered_at = now(), last_error = NULL
			WHERE id = ANY ($1::uuid[]) AND state = 'claimed'`, ids)
		return tag.RowsAffected(), err
	}
}

// SignAt fixes the clock that signs d's deliveries.
func SignAt(d *Dispatcher, now func() time.Time) {
	d.sink.(*webhook).now = now
}

// Sign is the webhook-signature header that deliveries carry (see sign).
func Sign(keys [][]byte, id, timestamp string, body []byte) string {
	return sign(keys, id, timestamp, body)
}
