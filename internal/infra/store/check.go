package store

import (
	"context"
	"fmt"
	"time"

	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
)

// Finding is one broken invariant or stale derived value that Check found,
// printed by `api check` as one line.
type Finding struct {
	Kind   string // a stable name, e.g. "balance"
	Detail string
}

func (f Finding) String() string { return f.Kind + ": " + f.Detail }

// CheckOptions are what some checks need to know of the configuration.
type CheckOptions struct {
	// Retention is OUTBOX_RETENTION: a delivered event older than it may
	// be gone [168h].
	Retention time.Duration
}

// check is one kind of finding: a statement that returns the rows breaking
// one rule (db/queries/check.sql, or the table's own file), and the line
// each row prints.
type check struct {
	kind string
	find func(ctx context.Context, q *dbsqlc.Queries, db dbsqlc.DBTX, o CheckOptions) ([]string, error)
}

// checks is every invariant and derived value of the contract that SQL can
// see, one kind each. Adding one: a statement in db/queries/check.sql (or
// in the table's own file, as the refunds' in orders.sql), an entry here, and a test that corrupts the database in that one way and
// sees exactly that kind (cmd/api/check_test.go). The constraints of the
// schema (paid_cents within total_cents, a line's quantity, …) are not
// repeated here: the database refuses any row that breaks them. Each kind
// calls its statement as q.Name(…): TestEveryQueryUsesAnIndex reads this
// list to let those statements scan whole tables.
var checks = []check{
	{"balance", func(ctx context.Context, q *dbsqlc.Queries, db dbsqlc.DBTX, _ CheckOptions) ([]string, error) {
		rows, err := q.ActorBalanceMismatches(ctx, db)
		return lines(rows, err, func(r dbsqlc.ActorBalanceMismatchesRow) string {
			return fmt.Sprintf("customer %s has balance_cents %d but their placed and shipped orders owe %d (difference %+d)",
				r.ID, r.BalanceCents, r.OwedCents, r.BalanceCents-r.OwedCents)
		})
	}},
	{"credit_limit", func(ctx context.Context, q *dbsqlc.Queries, db dbsqlc.DBTX, _ CheckOptions) ([]string, error) {
		rows, err := q.CheckBalancesOverLimit(ctx, db)
		return lines(rows, err, func(r dbsqlc.CheckBalancesOverLimitRow) string {
			return fmt.Sprintf("customer %s owes %d, over their credit limit of %d", r.ID, r.BalanceCents, r.CreditLimitCents)
		})
	}},
	{"paid", func(ctx context.Context, q *dbsqlc.Queries, db dbsqlc.DBTX, _ CheckOptions) ([]string, error) {
		rows, err := q.CheckPaidMismatches(ctx, db)
		return lines(rows, err, func(r dbsqlc.CheckPaidMismatchesRow) string {
			return fmt.Sprintf("order %s has paid_cents %d but its payments sum to %d", r.ID, r.PaidCents, r.PaymentsCents)
		})
	}},
	{"total", func(ctx context.Context, q *dbsqlc.Queries, db dbsqlc.DBTX, _ CheckOptions) ([]string, error) {
		rows, err := q.CheckTotalMismatches(ctx, db)
		return lines(rows, err, func(r dbsqlc.CheckTotalMismatchesRow) string {
			return fmt.Sprintf("order %s has total_cents %d but its lines sum to %d", r.ID, r.TotalCents, r.LinesCents)
		})
	}},
	{"staff", func(ctx context.Context, q *dbsqlc.Queries, db dbsqlc.DBTX, _ CheckOptions) ([]string, error) {
		n, err := q.CheckActiveStaff(ctx, db)
		if err != nil || n > 0 {
			return nil, err
		}
		return []string{"no active staff actor: nobody can manage the catalogue, the stock or the actors (create one with `api actor create --role staff`)"}, nil
	}},
	{"stock", func(ctx context.Context, q *dbsqlc.Queries, db dbsqlc.DBTX, _ CheckOptions) ([]string, error) {
		rows, err := q.StockLevelsMissing(ctx, db)
		return lines(rows, err, func(r dbsqlc.StockLevelsMissingRow) string {
			return fmt.Sprintf("product %s (sku %s) has no stock level: it is listed but can never be sold", r.ID, r.Sku)
		})
	}},
	{"negative_stock", func(ctx context.Context, q *dbsqlc.Queries, db dbsqlc.DBTX, _ CheckOptions) ([]string, error) {
		rows, err := q.CheckNegativeStock(ctx, db)
		return lines(rows, err, func(r dbsqlc.CheckNegativeStockRow) string {
			return fmt.Sprintf("product %s (sku %s) has stock %d, below zero", r.ProductID, r.Sku, r.Stock)
		})
	}},
	{"refund_beyond_paid", func(ctx context.Context, q *dbsqlc.Queries, db dbsqlc.DBTX, _ CheckOptions) ([]string, error) {
		rows, err := q.OrderRefundsBeyondPaid(ctx, db)
		return lines(rows, err, func(r dbsqlc.OrderRefundsBeyondPaidRow) string {
			return fmt.Sprintf("order %s (%s) has refunded_cents %d but paid_cents %d: only what a cancelled order was paid may be refunded",
				r.ID, r.Status, r.RefundedCents, r.PaidCents)
		})
	}},
	{"refund_sum", func(ctx context.Context, q *dbsqlc.Queries, db dbsqlc.DBTX, _ CheckOptions) ([]string, error) {
		rows, err := q.OrderRefundSumMismatches(ctx, db)
		return lines(rows, err, func(r dbsqlc.OrderRefundSumMismatchesRow) string {
			return fmt.Sprintf("order %s has refunded_cents %d but its refunds sum to %d (difference %+d)",
				r.ID, r.RefundedCents, r.RefundsCents, r.RefundedCents-r.RefundsCents)
		})
	}},
	{"order_event", func(ctx context.Context, q *dbsqlc.Queries, db dbsqlc.DBTX, o CheckOptions) ([]string, error) {
		rows, err := q.CheckOrdersWithoutPlacedEvent(ctx, db, o.Retention.Seconds())
		return lines(rows, err, func(r dbsqlc.CheckOrdersWithoutPlacedEventRow) string {
			return fmt.Sprintf("order %s, placed %s, has no order.placed event, though delivered events are kept %s",
				r.ID, r.CreatedAt.UTC().Format(time.RFC3339), o.Retention)
		})
	}},
}

// lines formats each row that a check's statement returned.
func lines[R any](rows []R, err error, line func(R) string) ([]string, error) {
	if err != nil {
		return nil, err
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = line(r)
	}
	return out, nil
}

// CheckKinds names every kind of finding Check looks for, in its order.
func CheckKinds() []string {
	kinds := make([]string, len(checks))
	for i, c := range checks {
		kinds[i] = c.kind
	}
	return kinds
}

// Check reads the database and reports every broken invariant and every
// derived value that differs from what it summarises (see checks). Each
// kind is one statement, so it sees one snapshot. It reads whole tables:
// an operator's command, not a request path.
func Check(ctx context.Context, db dbsqlc.DBTX, o CheckOptions) ([]Finding, error) {
	if o.Retention <= 0 {
		o.Retention = 168 * time.Hour
	}
	q := dbsqlc.New()
	var out []Finding
	for _, c := range checks {
		found, err := c.find(ctx, q, db, o)
		if err != nil {
			return nil, fmt.Errorf("check %s: %w", c.kind, postgres.Translate(err))
		}
		for _, d := range found {
			out = append(out, Finding{Kind: c.kind, Detail: d})
		}
	}
	return out, nil
}
