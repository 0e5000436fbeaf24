package store_test

import (
	"context"
	"testing"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// TestBrokenConstraintsAnswerTheirRulesCode: a write that slips past its
// guard (here a bare statement with no guard at all, on the transaction's
// connection) and breaks a constraint that backs a rule answers the rule's
// code, not a 500: the meaning each table's file gives its constraints
// (productConstraint, stockConstraint, orderConstraint, actorConstraint)
// reaches the caller of Runner.InTx. One whose constraint backs no code
// stays the driver's error. The list is of the constraints mapped when the
// meanings moved beside their tables; one mapped since is shown in the tests
// of the use case whose guard it backs, by a variant of the guarded
// statement without the condition the constraint repeats: the constraint
// alone refuses, and the caller gets the rule's code.
func TestBrokenConstraintsAnswerTheirRulesCode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.inTx(func(ctx context.Context, repos app.Repositories) error {
		_, err := repos.Orders().Insert(ctx, newOrder(t, orderID, line(mugID, mugPrice, 2)))
		return err
	})
	for _, c := range []struct {
		constraint string
		breaking   string
		want       domain.Code
	}{
		{"products_sku_key", `UPDATE products SET sku = 'MUG' WHERE id = '` + plateID.String() + `'`, domain.CodeSKUTaken},
		{"stock_levels_stock_nonnegative", `UPDATE stock_levels SET stock = -1`, domain.CodeInsufficientStock},
		{"orders_paid_within_total", `UPDATE orders SET paid_cents = total_cents + 1`, domain.CodeOverpayment},
		{"actors.balance_cents NOT NULL", `UPDATE actors SET balance_cents = NULL`, domain.CodeCreditLimitExceeded},
		{"orders_status_check (backs no code)", `UPDATE orders SET status = 'lost'`, ""},
	} {
		err := b.runner.InTx(b.ctx, nil, app.ReadCommitted, func(ctx context.Context, repos app.Repositories) error {
			_, err := testkit.Conn(repos).Exec(ctx, c.breaking)
			return err
		})
		if err == nil {
			t.Errorf("%s: %s was not refused", c.constraint, c.breaking)
			continue
		}
		if got := domain.ErrorCode(err); got != c.want {
			t.Errorf("%s: code %q, want %q (%v)", c.constraint, got, c.want, err)
		}
	}
}
