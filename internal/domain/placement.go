package domain

import (
	"fmt"

	"github.com/google/uuid"
)

// CodeCreditLimitExceeded is the outcome of a placement that would take the
// customer's outstanding balance past their credit limit.
const CodeCreditLimitExceeded Code = "credit_limit_exceeded"

// Credit is a customer's credit as read under their row lock: the limit, the
// maintained outstanding balance (the sum of total - paid over their placed
// and shipped orders) and whether they may act.
type Credit struct {
	Limit   Cents
	Balance Cents
	Active  bool
}

// CheckOrder refuses an order whose total would take the balance past the
// limit. A limit lowered below the balance refuses every new order and
// nothing else.
func (c Credit) CheckOrder(total Cents) error {
	if c.Balance+total > c.Limit {
		return Errorf(CodeCreditLimitExceeded,
			"order total %d cents plus outstanding %d cents exceeds the credit limit of %d cents", total, c.Balance, c.Limit)
	}
	return nil
}

// ErrCreditRefused is what a placement gets when the guarded charge of its
// total refuses to pass the credit limit. Under the customer's row lock
// Credit.CheckOrder refuses first, with the figures; this is the backstop
// of the statement that writes the balance.
var ErrCreditRefused = Errorf(CodeCreditLimitExceeded, "the order total exceeds the customer's remaining credit")

// StockRow is a product's locked stock level and its catalogue price, as a
// placement reads them.
type StockRow struct {
	ID    uuid.UUID
	Price Cents
	Stock int64
}

// Placement is a decided order: the order, priced, and the stock it takes
// (a negative delta by product id).
type Placement struct {
	Order *Order
	Take  map[uuid.UUID]int64
}

// Place decides an order of lines for customer on what was read under the
// locks: the customer's credit and the stock rows of the ordered products
// with their catalogue prices. Each line is priced at its product's price.
// The checks run in this order, and the first that fails decides:
//
//  1. every product exists (validation_failed, one field error
//     lines[i].product_id per unknown product);
//  2. every line has the stock it asks for (*InsufficientStockError, the
//     first short line in the request's order); one short line refuses the
//     whole order;
//  3. the total fits the credit left (credit_limit_exceeded,
//     Credit.CheckOrder).
//
// Place reads no clock and no database: the caller locks, mints id, and
// writes what it returns.
func Place(id, customer uuid.UUID, credit Credit, stock []StockRow, lines []LineRequest) (Placement, error) {
	byID := make(map[uuid.UUID]StockRow, len(stock))
	for _, r := range stock {
		byID[r.ID] = r
	}
	priced, err := priceLines(byID, lines)
	if err != nil {
		return Placement{}, err
	}
	if err := checkStock(byID, lines); err != nil {
		return Placement{}, err
	}
	order, err := PlaceOrder(id, customer, priced)
	if err != nil {
		return Placement{}, err
	}
	if err := credit.CheckOrder(order.Total()); err != nil {
		return Placement{}, err
	}
	take := make(map[uuid.UUID]int64, len(lines))
	for _, l := range lines {
		take[l.ProductID] = -int64(l.Quantity)
	}
	return Placement{Order: order, Take: take}, nil
}

// priceLines prices each line at its product's catalogue price, and refuses
// every line whose product is not among the rows.
func priceLines(byID map[uuid.UUID]StockRow, lines []LineRequest) ([]OrderLine, error) {
	var v Validation
	priced := make([]OrderLine, len(lines))
	for i, l := range lines {
		r, ok := byID[l.ProductID]
		if !ok {
			v.Add(fmt.Sprintf("lines[%d].product_id", i), "no such product")
			continue
		}
		priced[i] = OrderLine{ProductID: l.ProductID, Quantity: l.Quantity, UnitPrice: r.Price}
	}
	return priced, v.Err()
}

// checkStock refuses the first line, in the request's order, that asks for
// more than its row holds.
func checkStock(byID map[uuid.UUID]StockRow, lines []LineRequest) error {
	for _, l := range lines {
		if r := byID[l.ProductID]; r.Stock < int64(l.Quantity) {
			return &InsufficientStockError{ProductID: l.ProductID, Requested: int64(l.Quantity), Available: r.Stock}
		}
	}
	return nil
}
