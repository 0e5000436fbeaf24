package infra

import (
	"context"
	"fmt"

	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

// Finding is one broken invariant or stale derived value that Check found,
// printed by `api check` as one line.
type Finding struct {
	Kind   string // a stable name, e.g. "balance"
	Detail string
}

func (f Finding) String() string { return f.Kind + ": " + f.Detail }

// Check reads the database and reports every derived value that differs
// from what it summarises: each customer's maintained outstanding balance
// against the sum of total_cents - paid_cents over their placed and shipped
// orders; every product without its stock level; every order refunded beyond
// what was paid or without being cancelled, and every order whose
// refunded_cents differs from the sum of its refunds. Each comparison is one statement, so it sees one snapshot and a
// write committing meanwhile cannot make it report a difference that never
// was. It reads every order: an operator's command, not a request path.
func Check(ctx context.Context, db dbsqlc.DBTX) ([]Finding, error) {
	rows, err := dbsqlc.New().ActorBalanceMismatches(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("compare balances with orders: %w", translate(err))
	}
	out := make([]Finding, 0, len(rows))
	for _, r := range rows {
		out = append(out, Finding{Kind: "balance", Detail: fmt.Sprintf(
			"customer %s has balance_cents %d but their placed and shipped orders owe %d (difference %+d)",
			r.ID, r.BalanceCents, r.OwedCents, r.BalanceCents-r.OwedCents)})
	}
	missing, err := dbsqlc.New().StockLevelsMissing(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("find products without a stock level: %w", translate(err))
	}
	for _, r := range missing {
		out = append(out, Finding{Kind: "stock", Detail: fmt.Sprintf(
			"product %s (sku %s) has no stock level: it is listed but can never be sold", r.ID, r.Sku)})
	}
	refunds, err := refundFindings(ctx, db)
	if err != nil {
		return nil, err
	}
	return append(out, refunds...), nil
}

// refundFindings reports the refund invariants: refunded_cents within
// paid_cents and only on a cancelled order (kind "refund_beyond_paid"), and
// refunded_cents equal to the sum of the order's refunds (kind
// "refund_sum").
func refundFindings(ctx context.Context, db dbsqlc.DBTX) ([]Finding, error) {
	beyond, err := dbsqlc.New().OrderRefundsBeyondPaid(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("compare refunds with payments: %w", translate(err))
	}
	var out []Finding
	for _, r := range beyond {
		out = append(out, Finding{Kind: "refund_beyond_paid", Detail: fmt.Sprintf(
			"order %s (%s) has refunded_cents %d but paid_cents %d: only what a cancelled order was paid may be refunded",
			r.ID, r.Status, r.RefundedCents, r.PaidCents)})
	}
	sums, err := dbsqlc.New().OrderRefundSumMismatches(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("compare refunded amounts with refunds: %w", translate(err))
	}
	for _, r := range sums {
		out = append(out, Finding{Kind: "refund_sum", Detail: fmt.Sprintf(
			"order %s has refunded_cents %d but its refunds sum to %d (difference %+d)",
			r.ID, r.RefundedCents, r.RefundsCents, r.RefundedCents-r.RefundsCents)})
	}
	return out, nil
}
