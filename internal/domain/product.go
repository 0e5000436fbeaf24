package domain

import (
	"fmt"
	"time"

	"github.com/google/uuid"
)

// The outcomes of the catalogue's and the stock's rules.
const (
	// CodeSKUTaken: a product already has the SKU (a unique key).
	CodeSKUTaken Code = "sku_taken"
	// CodeInsufficientStock: a change needs more units than are in stock.
	CodeInsufficientStock Code = "insufficient_stock"
)

// MaxStock bounds a product's initial stock.
const MaxStock = 1_000_000_000

// MaxAdjustment bounds the size of one stock adjustment.
const MaxAdjustment = 1_000_000

// Product is a catalogue entry: what is sold and at what price. Its version
// covers these fields only; stock is a StockLevel, an aggregate of its own,
// because a sale and a price edit do not conflict and must not make each
// other's precondition fail (EXT.CONCURRENCY.ADOPT.001).
//
// Patterns and rule ids: docs/patterns.md.
type Product struct {
	id        uuid.UUID
	sku       SKU
	name      string
	price     Cents
	version   Version
	createdAt time.Time
	updatedAt time.Time
}

// NewProduct validates a new catalogue entry and its initial stock, and
// reports every broken rule.
func NewProduct(id uuid.UUID, sku string, name string, priceCents int64, stock int64) (*Product, *StockLevel, error) {
	var v Validation
	s, err := ParseSKU(sku)
	v.Merge("sku", err)
	n, err := ParseName(name)
	v.Merge("name", err)
	p, err := ParseCents(priceCents)
	v.Merge("price_cents", err)
	if stock < 0 || stock > MaxStock {
		v.Add("stock", "must be between 0 and 1000000000")
	}
	if err := v.Err(); err != nil {
		return nil, nil, err
	}
	return &Product{id: id, sku: s, name: n, price: p, version: 1}, &StockLevel{productID: id, stock: stock, version: 1}, nil
}

// RehydrateProduct rebuilds a product from storage. Only repositories call it;
// the values were validated when they were written.
func RehydrateProduct(id uuid.UUID, sku SKU, name string, price Cents, version Version, createdAt, updatedAt time.Time) *Product {
	return &Product{id: id, sku: sku, name: name, price: price, version: version, createdAt: createdAt, updatedAt: updatedAt}
}

func (p *Product) ID() uuid.UUID        { return p.id }
func (p *Product) SKU() SKU             { return p.sku }
func (p *Product) Name() string         { return p.name }
func (p *Product) Price() Cents         { return p.price }
func (p *Product) Version() Version     { return p.version }
func (p *Product) CreatedAt() time.Time { return p.createdAt }
func (p *Product) UpdatedAt() time.Time { return p.updatedAt }

// StockLevel is the inventory of one product: how many units can be sold.
// Invariant: stock is never negative. Every change (a sale, a cancellation,
// an adjustment) adds a delta and commutes with the others, so none takes a
// precondition; the database enforces the invariant with guarded statements
// and a CHECK constraint, and the aggregate refuses to be built with a
// negative stock. Its version changes with every change; it tells a reader
// whether what it holds is current, and is never a precondition of a write.
type StockLevel struct {
	productID uuid.UUID
	stock     int64
	version   Version
	updatedAt time.Time
}

// RehydrateStockLevel rebuilds a stock level from storage. Only repositories
// call it.
func RehydrateStockLevel(productID uuid.UUID, stock int64, version Version, updatedAt time.Time) *StockLevel {
	return &StockLevel{productID: productID, stock: stock, version: version, updatedAt: updatedAt}
}

func (s *StockLevel) ProductID() uuid.UUID { return s.productID }
func (s *StockLevel) Stock() int64         { return s.stock }
func (s *StockLevel) Version() Version     { return s.version }
func (s *StockLevel) UpdatedAt() time.Time { return s.updatedAt }

// ProductPatch is a validated partial update of a product's catalogue fields.
// Stock is not part of it: it changes only through adjustments and orders.
type ProductPatch struct {
	Name  *string
	Price *Cents
}

// NewProductPatch validates a patch; at least one field must be set.
func NewProductPatch(name *string, priceCents *int64) (ProductPatch, error) {
	var v Validation
	var patch ProductPatch
	if name == nil && priceCents == nil {
		// Each field the caller could send is named, so that a client
		// that marks errors by field path has a place to show this one.
		v.Add("name", "at least one of name and price_cents is required")
		v.Add("price_cents", "at least one of name and price_cents is required")
	}
	if name != nil {
		n, err := ParseName(*name)
		v.Merge("name", err)
		patch.Name = &n
	}
	if priceCents != nil {
		c, err := ParseCents(*priceCents)
		v.Merge("price_cents", err)
		patch.Price = &c
	}
	return patch, v.Err()
}

// StockAdjustment is a validated change of stock by a signed delta.
type StockAdjustment struct {
	ProductID uuid.UUID
	Delta     int64
	Reason    string
}

// NewStockAdjustment validates a delta (non-zero, at most a million either
// way) and a reason.
func NewStockAdjustment(productID uuid.UUID, delta int64, reason string) (StockAdjustment, error) {
	var v Validation
	if delta == 0 || delta < -MaxAdjustment || delta > MaxAdjustment {
		v.Add("delta", "must be non-zero and between -1000000 and 1000000")
	}
	r, err := ParseName(reason)
	v.Merge("reason", err)
	return StockAdjustment{ProductID: productID, Delta: delta, Reason: r}, v.Err()
}

// InsufficientStockError says a product has fewer units than a change needs,
// with the figures. It is a domain error like any other: errors.As finds in
// it an *Error of code insufficient_stock whose detail is its message, so
// ErrorCode and every mapping of *Error treat it without a case of its own.
type InsufficientStockError struct {
	ProductID uuid.UUID
	Requested int64
	Available int64
}

func (e *InsufficientStockError) Error() string {
	return fmt.Sprintf("product %s has %d in stock, %d requested", e.ProductID, e.Available, e.Requested)
}

// As makes errors.As see e as the *Error it stands for.
func (e *InsufficientStockError) As(target any) bool {
	de, ok := target.(**Error)
	if ok {
		*de = &Error{Code: CodeInsufficientStock, Detail: e.Error()}
	}
	return ok
}
