package domain_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// fieldsOf returns the field paths of a validation error, or nil.
func fieldsOf(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var de *domain.Error
	if !errors.As(err, &de) || de.Code != domain.CodeValidation {
		t.Fatalf("error %v is not a validation error", err)
	}
	var out []string
	for _, f := range de.Fields {
		if f.Message == "" {
			t.Errorf("field %q has no message", f.Field)
		}
		out = append(out, f.Field)
	}
	return out
}

func TestParseSKU(t *testing.T) {
	t.Parallel()
	cases := map[string]bool{
		"A": true, "MUG-001": true, "a.b_c-d": true, strings.Repeat("x", 64): true, "0": true,
		"": false, strings.Repeat("x", 65): false, "has space": false, "ümlaut": false, "a/b": false,
		"a\n": false, "MUG-001\n": false, " MUG": false,
	}
	for in, ok := range cases {
		got, err := domain.ParseSKU(in)
		if (err == nil) != ok {
			t.Errorf("ParseSKU(%q) error %v, want ok=%v", in, err, ok)
		}
		if ok && string(got) != in {
			t.Errorf("ParseSKU(%q) = %q", in, got)
		}
	}
}

func TestParseQuantity(t *testing.T) {
	t.Parallel()
	cases := map[int64]bool{1: true, 2: true, 999: true, 1000: true, 0: false, -1: false, 1001: false, 1 << 40: false}
	for in, ok := range cases {
		got, err := domain.ParseQuantity(in)
		if (err == nil) != ok || (ok && int64(got) != in) {
			t.Errorf("ParseQuantity(%d) = %d, %v; want ok=%v", in, got, err, ok)
		}
	}
}

func TestParseCents(t *testing.T) {
	t.Parallel()
	cases := map[int64]bool{0: true, 1: true, int64(domain.MaxCents): true, -1: false, int64(domain.MaxCents) + 1: false, -1 << 62: false}
	for in, ok := range cases {
		got, err := domain.ParseCents(in)
		if (err == nil) != ok || (ok && int64(got) != in) {
			t.Errorf("ParseCents(%d) = %d, %v; want ok=%v", in, got, err, ok)
		}
	}
}

func TestParseName(t *testing.T) {
	t.Parallel()
	cases := map[string]bool{
		"a": true, strings.Repeat("é", 200): true, "Enamel mug": true,
		"": false, strings.Repeat("é", 201): false, "bad \xff utf-8": false,
		"   ": false, "\u00a0\u2003": false, " padded ": true,
		// Control characters: PostgreSQL refuses U+0000 in text (SQLSTATE
		// 22021), and the others have no place in a name or a reason.
		"mug\x00": false, "\x00": false, "line\nbreak": false, "tab\there": false,
		"del\x7f": false, "c1 \u0085 next line": false, "esc \x1b[31m": false,
	}
	for in, ok := range cases {
		if _, err := domain.ParseName(in); (err == nil) != ok {
			t.Errorf("ParseName(%.20q…) error %v, want ok=%v", in, err, ok)
		}
	}
}

// TestParseText: ParseName's rule at another length.
func TestParseText(t *testing.T) {
	t.Parallel()
	for in, ok := range map[string]bool{strings.Repeat("é", 500): true, strings.Repeat("é", 501): false, "": false, "two\nlines": false} {
		if _, err := domain.ParseText(in, 500); (err == nil) != ok {
			t.Errorf("ParseText(%.20q…, 500) error %v, want ok=%v", in, err, ok)
		}
	}
}

func TestNewProduct(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	cases := []struct {
		name         string
		sku, pname   string
		price, stock int64
		fields       []string
	}{
		{"valid", "MUG-1", "Mug", 900, 10, nil},
		{"zero price and stock", "FREE", "Free sample", 0, 0, nil},
		{"stock at the bound", "MAX", "Max", 1, domain.MaxStock, nil},
		{"every rule broken", "bad sku", "", -1, -1, []string{"sku", "name", "price_cents", "stock"}},
		{"stock above the bound", "MAX", "Max", 1, domain.MaxStock + 1, []string{"stock"}},
		{"price above the bound", "P", "P", int64(domain.MaxCents) + 1, 1, []string{"price_cents"}},
	}
	for _, c := range cases {
		p, level, err := domain.NewProduct(id, c.sku, c.pname, c.price, c.stock)
		if got := fieldsOf(t, err); !slices.Equal(got, c.fields) {
			t.Errorf("%s: fields %q, want %q", c.name, got, c.fields)
			continue
		}
		if err != nil {
			if p != nil || level != nil {
				t.Errorf("%s: a product or stock level came back with the error", c.name)
			}
			continue
		}
		if p.ID() != id || string(p.SKU()) != c.sku || p.Name() != c.pname || int64(p.Price()) != c.price || p.Version() != 1 {
			t.Errorf("%s: product %+v", c.name, p)
		}
		if level.ProductID() != id || level.Stock() != c.stock || level.Version() != 1 {
			t.Errorf("%s: stock level %+v", c.name, level)
		}
	}
}

func TestNewProductPatch(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	num := func(n int64) *int64 { return &n }
	cases := []struct {
		name   string
		pname  *string
		price  *int64
		fields []string
	}{
		{"name only", str("New"), nil, nil},
		{"price only", nil, num(0), nil},
		{"both", str("New"), num(100), nil},
		{"neither", nil, nil, []string{"name", "price_cents"}},
		{"empty name", str(""), nil, []string{"name"}},
		{"negative price", nil, num(-1), []string{"price_cents"}},
		{"both broken", str(strings.Repeat("n", 201)), num(-5), []string{"name", "price_cents"}},
	}
	for _, c := range cases {
		patch, err := domain.NewProductPatch(c.pname, c.price)
		if got := fieldsOf(t, err); !slices.Equal(got, c.fields) {
			t.Errorf("%s: fields %q, want %q", c.name, got, c.fields)
			continue
		}
		if err == nil {
			if (patch.Name == nil) != (c.pname == nil) || (patch.Price == nil) != (c.price == nil) {
				t.Errorf("%s: patch %+v", c.name, patch)
			}
			if c.pname != nil && *patch.Name != *c.pname || c.price != nil && int64(*patch.Price) != *c.price {
				t.Errorf("%s: patch values %+v", c.name, patch)
			}
		}
	}
}

func TestNewStockAdjustment(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	cases := []struct {
		delta  int64
		reason string
		fields []string
	}{
		{1, "delivery", nil},
		{-1, "breakage", nil},
		{domain.MaxAdjustment, "big delivery", nil},
		{-domain.MaxAdjustment, "big loss", nil},
		{0, "nothing", []string{"delta"}},
		{domain.MaxAdjustment + 1, "too big", []string{"delta"}},
		{-domain.MaxAdjustment - 1, "too big", []string{"delta"}},
		{5, "", []string{"reason"}},
		{0, strings.Repeat("r", 201), []string{"delta", "reason"}},
	}
	for _, c := range cases {
		adj, err := domain.NewStockAdjustment(id, c.delta, c.reason)
		if got := fieldsOf(t, err); !slices.Equal(got, c.fields) {
			t.Errorf("NewStockAdjustment(%d, %.10q): fields %q, want %q", c.delta, c.reason, got, c.fields)
			continue
		}
		if err == nil && (adj.ProductID != id || adj.Delta != c.delta || adj.Reason != c.reason) {
			t.Errorf("adjustment %+v", adj)
		}
	}
}

func TestParseLineRequests(t *testing.T) {
	t.Parallel()
	a, b := uuid.NewString(), uuid.NewString()
	many := func(n int) ([]string, []int64) {
		ids, qty := make([]string, n), make([]int64, n)
		for i := range n {
			ids[i], qty[i] = uuid.NewString(), 1
		}
		return ids, qty
	}
	ids50, qty50 := many(50)
	ids51, qty51 := many(51)
	cases := []struct {
		name   string
		ids    []string
		qty    []int64
		fields []string
	}{
		{"one line", []string{a}, []int64{1}, nil},
		{"two lines", []string{a, b}, []int64{1000, 3}, nil},
		{"50 lines", ids50, qty50, nil},
		{"no lines", nil, nil, []string{"lines"}},
		{"51 lines", ids51, qty51, []string{"lines"}},
		{"bad quantities", []string{a, b}, []int64{0, 1001}, []string{"lines[0].quantity", "lines[1].quantity"}},
		{"not a UUID", []string{"x", b}, []int64{1, 1}, []string{"lines[0].product_id"}},
		{"a product twice", []string{a, b, a}, []int64{1, 1, 2}, []string{"lines[2].product_id"}},
		{"same product, other spelling", []string{a, strings.ToUpper(a)}, []int64{1, 1}, []string{"lines[1].product_id"}},
	}
	for _, c := range cases {
		lines, err := domain.ParseLineRequests(c.ids, c.qty)
		if got := fieldsOf(t, err); !slices.Equal(got, c.fields) {
			t.Errorf("%s: fields %q, want %q", c.name, got, c.fields)
			continue
		}
		if err == nil {
			for i, l := range lines {
				if l.ProductID.String() != strings.ToLower(c.ids[i]) || int64(l.Quantity) != c.qty[i] {
					t.Errorf("%s: line %d = %+v", c.name, i, l)
				}
			}
		}
	}
}

// order builds an order in a given state, as a repository would.
func order(status domain.OrderStatus, total, paid domain.Cents) *domain.Order {
	return refundedOrder(status, total, paid, 0)
}

// refundedOrder is order with refunds.
func refundedOrder(status domain.OrderStatus, total, paid, refunded domain.Cents) *domain.Order {
	now := time.Now()
	lines := []domain.OrderLine{{ProductID: uuid.New(), Quantity: 1, UnitPrice: total}}
	return domain.RehydrateOrder(domain.OrderRecord{
		ID: uuid.New(), CustomerID: uuid.New(), Status: status, Lines: lines, Total: total, Paid: paid, Refunded: refunded,
		Version: 3, CreatedAt: now, UpdatedAt: now,
	})
}

// wantCode fails unless err carries code ("" for no error).
func wantCode(t *testing.T, what string, err error, code domain.Code) {
	t.Helper()
	if got := domain.ErrorCode(err); got != code || (code == "") != (err == nil) {
		t.Errorf("%s: error %v (code %q), want code %q", what, err, got, code)
	}
}

func TestOrderTransitions(t *testing.T) {
	t.Parallel()
	cases := []struct {
		from      domain.OrderStatus
		paid      domain.Cents
		cancel    domain.Code
		ship      domain.Code
		afterCncl domain.OrderStatus
		afterShip domain.OrderStatus
	}{
		{domain.StatusPlaced, 0, "", "", domain.StatusCancelled, domain.StatusShipped},
		// Paid in part or in full, it may still be cancelled: the payments become refundable.
		{domain.StatusPlaced, 1, "", "", domain.StatusCancelled, domain.StatusShipped},
		{domain.StatusPlaced, 100, "", "", domain.StatusCancelled, domain.StatusShipped},
		{domain.StatusShipped, 0, domain.CodeInvalidTransition, domain.CodeInvalidTransition, domain.StatusShipped, domain.StatusShipped},
		{domain.StatusCancelled, 0, domain.CodeInvalidTransition, domain.CodeInvalidTransition, domain.StatusCancelled, domain.StatusCancelled},
	}
	for _, c := range cases {
		name := fmt.Sprintf("%s, paid %d", c.from, c.paid)
		o := order(c.from, 100, c.paid)
		wantCode(t, name+": cancel", o.Cancel(), c.cancel)
		if o.Status() != c.afterCncl {
			t.Errorf("%s: after cancel %s, want %s", name, o.Status(), c.afterCncl)
		}
		o = order(c.from, 100, c.paid)
		wantCode(t, name+": ship", o.Ship(), c.ship)
		if o.Status() != c.afterShip {
			t.Errorf("%s: after ship %s, want %s", name, o.Status(), c.afterShip)
		}
	}
	// Final states stay final.
	o := order(domain.StatusPlaced, 100, 0)
	wantCode(t, "ship", o.Ship(), "")
	wantCode(t, "cancel a shipped order", o.Cancel(), domain.CodeInvalidTransition)
	o = order(domain.StatusPlaced, 100, 0)
	wantCode(t, "cancel", o.Cancel(), "")
	wantCode(t, "ship a cancelled order", o.Ship(), domain.CodeInvalidTransition)
}

func TestOrderCheckPayment(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status domain.OrderStatus
		total  domain.Cents
		paid   domain.Cents
		amount domain.Cents
		code   domain.Code
	}{
		{domain.StatusPlaced, 100, 0, 1, ""},
		{domain.StatusPlaced, 100, 0, 100, ""},
		{domain.StatusPlaced, 100, 40, 60, ""},
		{domain.StatusShipped, 100, 0, 100, ""},
		{domain.StatusPlaced, 100, 0, 101, domain.CodeOverpayment},
		{domain.StatusPlaced, 100, 100, 1, domain.CodeOverpayment},
		{domain.StatusShipped, 100, 50, 51, domain.CodeOverpayment},
		{domain.StatusCancelled, 100, 0, 1, domain.CodeInvalidTransition},
	}
	for _, c := range cases {
		o := order(c.status, c.total, c.paid)
		wantCode(t, fmt.Sprintf("%s order %d/%d, pay %d", c.status, c.paid, c.total, c.amount), o.CheckPayment(c.amount), c.code)
	}
}

func TestOrderCheckRefund(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status         domain.OrderStatus
		paid, refunded domain.Cents
		amount         domain.Cents
		code           domain.Code
	}{
		{domain.StatusCancelled, 100, 0, 1, ""},
		{domain.StatusCancelled, 100, 0, 100, ""},
		{domain.StatusCancelled, 100, 40, 60, ""},
		{domain.StatusCancelled, 100, 0, 101, domain.CodeOverRefund},
		{domain.StatusCancelled, 100, 100, 1, domain.CodeOverRefund},
		{domain.StatusCancelled, 0, 0, 1, domain.CodeOverRefund},
		{domain.StatusPlaced, 100, 0, 1, domain.CodeInvalidTransition},
		{domain.StatusShipped, 100, 0, 1, domain.CodeInvalidTransition},
	}
	for _, c := range cases {
		o := refundedOrder(c.status, 100, c.paid, c.refunded)
		wantCode(t, fmt.Sprintf("%s order paid %d refunded %d, refund %d", c.status, c.paid, c.refunded, c.amount), o.CheckRefund(c.amount), c.code)
	}
}

func TestParseRefund(t *testing.T) {
	t.Parallel()
	cases := []struct {
		amount int64
		reason string
		fields []string
	}{
		{1, "damaged in transit", nil},
		{int64(domain.MaxCents), "x", nil},
		{0, "x", []string{"amount_cents"}},
		{-5, "x", []string{"amount_cents"}},
		{int64(domain.MaxCents) + 1, "x", []string{"amount_cents"}},
		{5, "", []string{"reason"}},
		{5, "line\nbreak", []string{"reason"}},
		{5, "nul\x00", []string{"reason"}},
		{0, strings.Repeat("r", 201), []string{"amount_cents", "reason"}},
	}
	for _, c := range cases {
		r, err := domain.ParseRefund(c.amount, c.reason)
		if got := fieldsOf(t, err); !slices.Equal(got, c.fields) {
			t.Errorf("ParseRefund(%d, %.10q): fields %q, want %q", c.amount, c.reason, got, c.fields)
		}
		if err == nil && (r.Amount != domain.Cents(c.amount) || r.Reason != c.reason) {
			t.Errorf("ParseRefund(%d, %q) = %+v", c.amount, c.reason, r)
		}
	}
}

func TestParsePayment(t *testing.T) {
	t.Parallel()
	cases := map[int64][]string{1: nil, int64(domain.MaxCents): nil, 0: {"amount_cents"}, -5: {"amount_cents"}, int64(domain.MaxCents) + 1: {"amount_cents"}}
	for in, fields := range cases {
		_, err := domain.ParsePayment(in)
		if got := fieldsOf(t, err); !slices.Equal(got, fields) {
			t.Errorf("ParsePayment(%d): fields %q, want %q", in, got, fields)
		}
	}
}

func TestPlaceOrder(t *testing.T) {
	t.Parallel()
	lines := []domain.OrderLine{
		{ProductID: uuid.New(), Quantity: 3, UnitPrice: 250},
		{ProductID: uuid.New(), Quantity: 1000, UnitPrice: domain.MaxCents},
	}
	o, err := domain.PlaceOrder(uuid.New(), uuid.New(), lines)
	if err != nil {
		t.Fatal(err)
	}
	if want := 750 + 1000*domain.MaxCents; o.Total() != want || o.Paid() != 0 || o.Outstanding() != want {
		t.Errorf("total %d paid %d, want %d 0", o.Total(), o.Paid(), want)
	}
	if o.Status() != domain.StatusPlaced || o.Version() != 1 {
		t.Errorf("new order %s v%d", o.Status(), o.Version())
	}
	_, err = domain.PlaceOrder(uuid.New(), uuid.New(), nil)
	wantCode(t, "no lines", err, domain.CodeValidation)
}

func TestParseOrderStatusAndRole(t *testing.T) {
	t.Parallel()
	for _, s := range []domain.OrderStatus{domain.StatusPlaced, domain.StatusShipped, domain.StatusCancelled} {
		if got, err := domain.ParseOrderStatus(s.String()); err != nil || got != s {
			t.Errorf("ParseOrderStatus(%s) = %v, %v", s, got, err)
		}
	}
	if _, err := domain.ParseOrderStatus("PLACED"); err == nil {
		t.Error("ParseOrderStatus accepts PLACED")
	}
	for _, r := range []domain.Role{domain.RoleCustomer, domain.RoleStaff} {
		if got, err := domain.ParseRole(r.String()); err != nil || got != r {
			t.Errorf("ParseRole(%s) = %v, %v", r, got, err)
		}
	}
	for _, bad := range []string{"", "admin", "Staff"} {
		if _, err := domain.ParseRole(bad); err == nil {
			t.Errorf("ParseRole(%q) accepted", bad)
		}
	}
}

func TestErrorCode(t *testing.T) {
	t.Parallel()
	stock := &domain.InsufficientStockError{ProductID: uuid.New(), Requested: 2, Available: 1}
	cases := []struct {
		err  error
		code domain.Code
	}{
		{nil, ""},
		{errors.New("boom"), ""},
		{domain.ErrNotFound, domain.CodeNotFound},
		{fmt.Errorf("get: %w", domain.ErrVersionConflict), domain.CodeVersionConflict},
		{stock, domain.CodeInsufficientStock},
		{fmt.Errorf("place: %w", stock), domain.CodeInsufficientStock},
		{domain.Errorf(domain.CodeLastStaff, "x %d", 1), domain.CodeLastStaff},
	}
	for _, c := range cases {
		if got := domain.ErrorCode(c.err); got != c.code {
			t.Errorf("ErrorCode(%v) = %q, want %q", c.err, got, c.code)
		}
	}
	if !strings.Contains(stock.Error(), stock.ProductID.String()) {
		t.Errorf("insufficient stock message %q does not name the product", stock.Error())
	}
}

// TestValidationMerge: nested validation errors keep their paths under the
// prefix, and any other error is recorded against the prefix itself.
func TestValidationMerge(t *testing.T) {
	t.Parallel()
	var v domain.Validation
	v.Merge("none", nil)
	if v.Err() != nil {
		t.Fatal("a nil merge broke a rule")
	}
	inner := &domain.Error{Code: domain.CodeValidation, Fields: []domain.FieldError{{Field: "quantity", Message: "m"}, {Field: "", Message: "whole"}}}
	v.Merge("lines[0]", inner)
	v.Merge("sku", errors.New("plain"))
	v.Merge("id", domain.ErrNotFound)
	want := []string{"lines[0].quantity", "lines[0]", "sku", "id"}
	if got := fieldsOf(t, v.Err()); !slices.Equal(got, want) {
		t.Errorf("fields %q, want %q", got, want)
	}
}
