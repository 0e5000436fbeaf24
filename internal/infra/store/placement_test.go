package store_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
	"github.com/ordersvc/ordersvc/internal/infra/store"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// placement is one way to run a placement's statements on repositories.
type placement func(repos app.Repositories) app.PlacementStore

// pipelined is the production path: the repositories' placement store, two
// batches.
var pipelined placement = app.Repositories.Placement

// stepwise makes the same repository calls one statement at a time
// (store.StepwisePlacement).
var stepwise placement = store.StepwisePlacement

// stockForgotten is the naive variant: the pipelined write without the
// stock it takes.
type stockForgotten struct{ app.PlacementStore }

func (s stockForgotten) WritePlacement(ctx context.Context, o *domain.Order, _ map[uuid.UUID]int64) (*domain.Order, error) {
	return s.PlacementStore.WritePlacement(ctx, o, nil)
}

// place runs a placement of lines (quantity by product) with p, the way
// app.PlaceOrder does once its checks pass, and its outbox event.
func (b *repoBundle) place(p placement, id uuid.UUID, qty map[uuid.UUID]domain.Quantity) (app.PlacementLocks, *domain.Order, error) {
	var locks app.PlacementLocks
	var placed *domain.Order
	err := b.runner.InTx(b.ctx, nil, app.ReadCommitted, func(ctx context.Context, repos app.Repositories) (err error) {
		ids := []uuid.UUID{mugID, plateID}
		if locks, err = p(repos).LockForPlacement(ctx, customerID, ids); err != nil {
			return err
		}
		var lines []domain.OrderLine
		take := map[uuid.UUID]int64{}
		for _, r := range locks.Rows {
			if q := qty[r.ID]; q > 0 {
				lines = append(lines, line(r.ID, r.Price, q))
				take[r.ID] = -int64(q)
			}
		}
		if placed, err = p(repos).WritePlacement(ctx, newOrder(b.t, id, lines...), take); err != nil {
			return err
		}
		return repos.Outbox().Append(ctx, app.Event{Type: app.EventOrderPlaced, AggregateID: placed.ID(), Data: map[string]any{
			"total_cents": placed.Total(), "lines": len(placed.Lines()),
		}})
	})
	if err != nil {
		return locks, nil, err // what the caller gets: the pipelined writes failed the commit
	}
	return locks, placed, nil
}

// rows dumps what a placement writes, without ids made at run time and
// timestamps: orders, lines, stock levels, balances, outbox events.
func (b *repoBundle) rows() []string {
	b.t.Helper()
	var out []string
	for _, q := range []string{
		`SELECT to_jsonb(o) - 'created_at' - 'updated_at' FROM orders o ORDER BY id`,
		`SELECT to_jsonb(l) FROM order_lines l ORDER BY order_id, line_no`,
		`SELECT to_jsonb(s) - 'updated_at' FROM stock_levels s ORDER BY product_id`,
		`SELECT jsonb_build_object('id', id, 'balance_cents', balance_cents) FROM actors ORDER BY id`,
		`SELECT to_jsonb(e) - 'id' - 'occurred_at' - 'available_at' FROM outbox_events e ORDER BY aggregate_id, type`,
	} {
		rows, err := b.pool.Query(b.ctx, q)
		if err != nil {
			b.t.Fatal(err)
		}
		for rows.Next() {
			var row string
			if err := rows.Scan(&row); err != nil {
				b.t.Fatal(err)
			}
			out = append(out, row)
		}
		if err := rows.Err(); err != nil {
			b.t.Fatal(err)
		}
	}
	return out
}

// The pipelined placement (PlacementStore: two batches) and the stepwise one
// (one repository call per statement) are the same statements in the same
// order: given the same calls on two databases, they read the same locks,
// return the same orders, refuse the same charge, and leave the same rows.
// The naive variant, a pipelined write that forgets the stock, is caught by
// the same comparison.
func TestPlacementPipelinedAndStepwiseWriteTheSameRows(t *testing.T) {
	t.Parallel()
	second := uuid.MustParse("00000000-0000-7000-8000-0000000000b2")
	refused := uuid.MustParse("00000000-0000-7000-8000-0000000000b3")
	run := func(p placement) (*repoBundle, []any) {
		b := setup(t)
		var results []any
		for _, o := range []struct {
			id  uuid.UUID
			qty map[uuid.UUID]domain.Quantity
		}{
			{orderID, map[uuid.UUID]domain.Quantity{mugID: 2, plateID: 1}}, // 1,700
			{second, map[uuid.UUID]domain.Quantity{plateID: 9}},            // 6,300
			{refused, map[uuid.UUID]domain.Quantity{mugID: 5}},             // 2,500: past the limit
		} {
			locks, placed, err := b.place(p, o.id, o.qty)
			if placed != nil {
				results = append(results, placed.ID(), placed.Status(), placed.Total(), placed.Paid(), placed.Version(), placed.Lines())
				// The order returned is the one stored, timestamps
				// included (the pipelined path builds it without reading
				// it back).
				stored, err := b.repos.Orders().Get(b.ctx, placed.ID())
				if err != nil || !stored.CreatedAt().Equal(placed.CreatedAt()) || !stored.UpdatedAt().Equal(placed.UpdatedAt()) ||
					!reflect.DeepEqual(stored.Lines(), placed.Lines()) || stored.Version() != placed.Version() {
					t.Errorf("returned %+v, stored %+v (%v)", placed, stored, err)
				}
			}
			results = append(results, locks, err)
		}
		if !errors.Is(results[len(results)-1].(error), domain.ErrCreditRefused) {
			t.Fatalf("the third order was not refused its charge: %v", results[len(results)-1])
		}
		return b, results
	}
	p, pResults := run(pipelined)
	s, sResults := run(stepwise)
	if !reflect.DeepEqual(pResults, sResults) {
		t.Errorf("returned:\npipelined %v\nstepwise  %v", pResults, sResults)
	}
	pRows, sRows := p.rows(), s.rows()
	if strings.Join(pRows, "\n") != strings.Join(sRows, "\n") {
		t.Errorf("rows:\npipelined\n  %s\nstepwise\n  %s", strings.Join(pRows, "\n  "), strings.Join(sRows, "\n  "))
	}
	if len(pRows) != 2+3+2+2+2 {
		t.Errorf("%d rows, want 11 (2 orders, 3 lines, 2 stock levels, 2 actors, 2 events):\n  %s", len(pRows), strings.Join(pRows, "\n  "))
	}

	n, _ := run(func(repos app.Repositories) app.PlacementStore { return stockForgotten{repos.Placement()} })
	if strings.Join(n.rows(), "\n") == strings.Join(sRows, "\n") {
		t.Error("the naive variant (stock not taken) left the same rows: the comparison sees nothing")
	}
}

// The pipelined writes go out with COMMIT, so a write that refuses must fail
// its statement: a row count would be read only once committed. A charge
// past the credit limit (domain.Place refuses it first under the lock; here
// the write is called without that check) fails the commit, and nothing of
// the placement is kept. The naive variant, the charge's guard as a row
// count (zero rows: refused) sent with COMMIT, commits the order and takes
// the stock without charging the balance: the test catches it.
func TestPlacementChargeRefusedAtCommitKeepsNothing(t *testing.T) {
	t.Parallel()
	write := func(naive bool) (*repoBundle, error) {
		b := setup(t)
		err := b.runner.InTx(b.ctx, nil, app.ReadCommitted, func(ctx context.Context, repos app.Repositories) error {
			if _, err := repos.Placement().LockForPlacement(ctx, customerID, []uuid.UUID{mugID}); err != nil {
				return err
			}
			o := newOrder(b.t, orderID, line(mugID, creditLimit, 2)) // twice the limit
			if naive {
				db := testkit.Conn(repos).(postgres.Conn)
				if err := db.AtCommit(func(db dbsqlc.DBTX) error {
					tag, err := db.Exec(ctx, "-- name: NaiveChargeBalance\nUPDATE actors SET balance_cents = balance_cents + $2 WHERE id = $1 AND balance_cents + $2 <= credit_limit_cents",
						customerID, int64(o.Total()))
					if err == nil && tag.RowsAffected() != 1 {
						return domain.ErrCreditRefused // read after COMMIT: too late
					}
					return err
				}); err != nil {
					return err
				}
				_, err := repos.Orders().Insert(ctx, o)
				return err
			}
			_, err := repos.Placement().WritePlacement(ctx, o, map[uuid.UUID]int64{mugID: -2})
			return err
		})
		return b, err
	}
	kept := func(b *repoBundle) (orders, stock, balance int) {
		return b.queryInt(`SELECT count(*) FROM orders`), b.queryInt(`SELECT stock FROM stock_levels WHERE product_id = $1`, mugID),
			b.queryInt(`SELECT balance_cents FROM actors WHERE id = $1`, customerID)
	}
	b, err := write(false)
	if !errors.Is(err, domain.ErrCreditRefused) {
		t.Fatalf("a charge past the limit: %v, want credit_limit_exceeded", err)
	}
	if orders, stock, balance := kept(b); orders != 0 || stock != 10 || balance != 0 {
		t.Errorf("refused, yet kept %d orders, stock %d (of 10), balance %d", orders, stock, balance)
	}
	t.Run("naive row-count guard at commit is caught", func(t *testing.T) {
		n, err := write(true)
		if orders, _, balance := kept(n); orders == 0 || balance != 0 {
			t.Fatalf("the naive guard kept nothing (%d orders, balance %d, %v): the test cannot tell the two apart", orders, balance, err)
		}
		t.Logf("naive variant committed an order without its charge, as expected (error %v)", err)
	})
}
