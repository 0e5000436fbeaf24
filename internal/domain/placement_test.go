package domain_test

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// TestPlace: a placement is decided on the locked rows alone, without a
// database. Unknown products are refused first (every one named), then the
// first short line in the request's order, then the credit; an accepted
// order is priced at the rows' catalogue prices and takes exactly its
// quantities.
func TestPlace(t *testing.T) {
	t.Parallel()
	mug, plate, bowl, ghost := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	rows := []domain.StockRow{{ID: mug, Price: 500, Stock: 3}, {ID: plate, Price: 700, Stock: 1}, {ID: bowl, Price: 300, Stock: 0}}
	credit := domain.Credit{Limit: 3_000, Balance: 500, Active: true}
	line := func(id uuid.UUID, q domain.Quantity) domain.LineRequest {
		return domain.LineRequest{ProductID: id, Quantity: q}
	}
	cases := []struct {
		name   string
		credit domain.Credit
		lines  []domain.LineRequest
		code   domain.Code
		detail string   // the whole detail, when it is fixed
		fields []string // validation_failed's fields
		short  uuid.UUID
		total  domain.Cents
	}{
		{name: "priced at the rows' prices", credit: credit, lines: []domain.LineRequest{line(plate, 1), line(mug, 2)}, total: 1_700},
		{name: "exactly the stock and the credit left", credit: domain.Credit{Limit: 2_700, Balance: 500}, lines: []domain.LineRequest{line(mug, 3), line(plate, 1)}, total: 2_200},
		{name: "one unknown product", credit: credit, lines: []domain.LineRequest{line(mug, 1), line(ghost, 1)},
			code: domain.CodeValidation, detail: "the request breaks one or more field rules", fields: []string{"lines[1].product_id"}},
		{name: "unknown before short stock and credit", credit: domain.Credit{}, lines: []domain.LineRequest{line(ghost, 1), line(bowl, 1), line(uuid.Nil, 1)},
			code: domain.CodeValidation, fields: []string{"lines[0].product_id", "lines[2].product_id"}},
		{name: "short stock", credit: credit, lines: []domain.LineRequest{line(mug, 4)},
			code: domain.CodeInsufficientStock, detail: "product " + mug.String() + " has 3 in stock, 4 requested", short: mug},
		{name: "the first short line in the request's order", credit: credit, lines: []domain.LineRequest{line(mug, 1), line(plate, 2), line(bowl, 1)},
			code: domain.CodeInsufficientStock, short: plate},
		{name: "short stock before credit", credit: domain.Credit{Limit: 0}, lines: []domain.LineRequest{line(bowl, 1)},
			code: domain.CodeInsufficientStock, short: bowl},
		{name: "over the credit limit", credit: domain.Credit{Limit: 2_600, Balance: 500, Active: true}, lines: []domain.LineRequest{line(mug, 3), line(plate, 1)},
			code: domain.CodeCreditLimitExceeded, detail: "order total 2200 cents plus outstanding 500 cents exceeds the credit limit of 2600 cents"},
		{name: "a limit lowered below the balance refuses any order", credit: domain.Credit{Limit: 100, Balance: 500}, lines: []domain.LineRequest{line(mug, 1)},
			code: domain.CodeCreditLimitExceeded},
		{name: "no lines", credit: credit, lines: nil, code: domain.CodeValidation, detail: "an order has 1 to 50 lines"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			id, customer := uuid.New(), uuid.New()
			p, err := domain.Place(id, customer, c.credit, rows, c.lines)
			wantCode(t, c.name, err, c.code)
			if err != nil {
				checkRefusal(t, p, err, c.detail, c.fields, c.short)
				return
			}
			checkPlaced(t, p, c.lines, rows)
			if o := p.Order; o.ID() != id || o.CustomerID() != customer || o.Total() != c.total {
				t.Errorf("order %v of %v, total %d; want %v of %v, total %d", o.ID(), o.CustomerID(), o.Total(), id, customer, c.total)
			}
		})
	}
}

// checkPlaced checks that p is a new placed order of lines, each priced at
// its row's price, and takes exactly their quantities.
func checkPlaced(t *testing.T, p domain.Placement, lines []domain.LineRequest, rows []domain.StockRow) {
	t.Helper()
	if p.Order.Status() != domain.StatusPlaced || p.Order.Version() != 1 || len(p.Order.Lines()) != len(lines) {
		t.Fatalf("order %s v%d with %d lines, want placed v1 with %d", p.Order.Status(), p.Order.Version(), len(p.Order.Lines()), len(lines))
	}
	take := map[uuid.UUID]int64{}
	for i, l := range p.Order.Lines() {
		want := lines[i]
		price := rows[slices.IndexFunc(rows, func(r domain.StockRow) bool { return r.ID == want.ProductID })].Price
		if l != (domain.OrderLine{ProductID: want.ProductID, Quantity: want.Quantity, UnitPrice: price}) {
			t.Errorf("line %d = %+v, want %+v at %d", i, l, want, price)
		}
		take[l.ProductID] = -int64(l.Quantity)
	}
	if !maps.Equal(p.Take, take) {
		t.Errorf("takes %v, want %v", p.Take, take)
	}
}

// checkRefusal checks that a refused placement p is empty, and err's detail
// (when given), its validation fields (each "no such product") and, for
// short stock, the product of the error.
func checkRefusal(t *testing.T, p domain.Placement, err error, detail string, fields []string, short uuid.UUID) {
	t.Helper()
	if p.Order != nil || p.Take != nil {
		t.Errorf("a refused placement returned %+v", p)
	}
	var de *domain.Error
	if !errors.As(err, &de) || (detail != "" && de.Detail != detail) {
		t.Errorf("error %v, want detail %q", err, detail)
	}
	if fields != nil && !slices.Equal(fieldsOf(t, err), fields) {
		t.Errorf("fields %v, want %v", fieldsOf(t, err), fields)
	}
	for _, f := range de.Fields {
		if f.Message != "no such product" {
			t.Errorf("field %s: %q, want no such product", f.Field, f.Message)
		}
	}
	checkShort(t, err, short)
}

// checkShort checks that err is a stock error for short, or none when short
// is uuid.Nil.
func checkShort(t *testing.T, err error, short uuid.UUID) {
	t.Helper()
	var se *domain.InsufficientStockError
	if errors.As(err, &se) != (short != uuid.Nil) || (se != nil && se.ProductID != short) {
		t.Errorf("stock error %+v, want one for %v", se, short)
	}
}

// TestInsufficientStockIsADomainError: the stock error is found as an
// *Error of its code, with its message as the detail, wrapped or not, so
// that nothing maps it with a case of its own.
func TestInsufficientStockIsADomainError(t *testing.T) {
	t.Parallel()
	stock := &domain.InsufficientStockError{ProductID: uuid.New(), Requested: 2, Available: 1}
	for _, err := range []error{stock, errors.Join(errors.New("place"), stock)} {
		var de *domain.Error
		if !errors.As(err, &de) || de.Code != domain.CodeInsufficientStock || de.Detail != stock.Error() || de.Fields != nil {
			t.Errorf("errors.As(%v) = %+v, want insufficient_stock with detail %q", err, de, stock.Error())
		}
	}
	var v domain.Validation
	v.Merge("line", stock)
	if got := v.Err().(*domain.Error).Fields; len(got) != 1 || got[0].Message != stock.Error() {
		t.Errorf("merged as %+v", got)
	}
}
