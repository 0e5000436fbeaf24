package httpapi

import (
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
)

type productJSON struct {
	ID         uuid.UUID `json:"id"`
	SKU        string    `json:"sku"`
	Name       string    `json:"name"`
	PriceCents int64     `json:"price_cents"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

func toProductJSON(p *domain.Product) productJSON {
	return productJSON{
		ID: p.ID(), SKU: string(p.SKU()), Name: p.Name(), PriceCents: int64(p.Price()),
		CreatedAt: p.CreatedAt().UTC(), UpdatedAt: p.UpdatedAt().UTC(),
	}
}

type createProductIn struct {
	SKU        *string `json:"sku"`
	Name       *string `json:"name"`
	PriceCents *int64  `json:"price_cents"`
	Stock      *int64  `json:"stock"`
}

func (in createProductIn) command(target) (app.CreateProductCommand, error) {
	var v domain.Validation
	required(&v, "sku", in.SKU)
	required(&v, "name", in.Name)
	required(&v, "price_cents", in.PriceCents)
	if err := v.Err(); err != nil {
		return app.CreateProductCommand{}, err
	}
	cmd := app.CreateProductCommand{SKU: *in.SKU, Name: *in.Name, PriceCents: *in.PriceCents}
	if in.Stock != nil {
		cmd.Stock = *in.Stock
	}
	return cmd, nil
}

func (s *Server) createProduct(op operation) http.Handler {
	return keyed(s, op, createProductIn.command, s.app.CreateProduct.Handle, entity(toProductJSON, op.route))
}

func (s *Server) getProduct(operation) http.Handler {
	return getOne(s, s.app.GetProduct.Handle, toProductJSON)
}

func (s *Server) listProducts(operation) http.Handler {
	return listPage(s, s.app.ListProducts.Handle, (*domain.Product).ID, toProductJSON)
}

type updateProductIn struct {
	Name       *string `json:"name"`
	PriceCents *int64  `json:"price_cents"`
}

// updateProduct requires If-Match; the key is checked before it (keyed), so
// that a retried PATCH whose first response was lost replays its 200
// instead of a 409.
func (s *Server) updateProduct(op operation) http.Handler {
	return keyed(s, op, func(in updateProductIn, at target) (app.UpdateProductCommand, error) {
		return app.UpdateProductCommand{ID: at.id, Expected: at.expected, Name: in.Name, PriceCents: in.PriceCents}, nil
	}, s.app.UpdateProduct.Handle, entity(toProductJSON, ""))
}

type adjustStockIn struct {
	Delta  *int64  `json:"delta"`
	Reason *string `json:"reason"`
}

func (in adjustStockIn) command(at target) (app.AdjustStockCommand, error) {
	var v domain.Validation
	required(&v, "delta", in.Delta)
	required(&v, "reason", in.Reason)
	if err := v.Err(); err != nil {
		return app.AdjustStockCommand{}, err
	}
	return app.AdjustStockCommand{ProductID: at.id, Delta: *in.Delta, Reason: *in.Reason}, nil
}

type stockAdjustedJSON struct {
	ProductID uuid.UUID `json:"product_id"`
	Delta     int64     `json:"delta"`
	Reason    string    `json:"reason"`
	Stock     int64     `json:"stock"`
}

func (s *Server) adjustStock(op operation) http.Handler {
	return keyed(s, op, adjustStockIn.command, s.app.AdjustStock.Handle, func(a app.StockAdjusted) (any, map[string]string) {
		return stockAdjustedJSON{ProductID: a.Level.ProductID(), Delta: a.Adjustment.Delta, Reason: a.Adjustment.Reason, Stock: a.Level.Stock()}, nil
	})
}

type stockLevelJSON struct {
	ProductID uuid.UUID `json:"product_id"`
	Stock     int64     `json:"stock"`
	UpdatedAt time.Time `json:"updated_at"`
}

func toStockLevelJSON(s *domain.StockLevel) stockLevelJSON {
	return stockLevelJSON{ProductID: s.ProductID(), Stock: s.Stock(), UpdatedAt: s.UpdatedAt().UTC()}
}

// getStock answers a product's stock level. Its ETag comes from the stock
// level's own version, so caches revalidate with If-None-Match; no write on
// stock takes If-Match.
func (s *Server) getStock(operation) http.Handler {
	return getOne(s, s.app.GetStock.Handle, toStockLevelJSON)
}

func (s *Server) listStock(operation) http.Handler {
	return listPage(s, s.app.ListStock.Handle, (*domain.StockLevel).ProductID, toStockLevelJSON)
}
