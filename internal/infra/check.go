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
// orders; and every product without its stock level. Each comparison is one statement, so it sees one snapshot and a
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
	return out, nil
}
