package httpapi

import (
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
)

// productOperations are the product and stock operations, in the order of
// openapi.yaml (operations.go joins the lists).
func productOperations() []operation {
	return []operation{
		{name: "createProduct", method: "POST", route: "/v1/products", status: 201, key: keyAccepted, access: app.StaffOnly,
			serve: (*Server).createProduct, forms: forms(formOf(1, func(c app.CreateProductCommand) canonical {
				return canonical{"sku": c.SKU, "name": c.Name, "price_cents": c.PriceCents, "stock": c.Stock}
			}), legacyForm("POST", "/v1/products", nil, func(c app.CreateProductCommand) any {
				return struct {
					SKU        string
					Name       string
					PriceCents int64
					Stock      int64
				}{c.SKU, c.Name, c.PriceCents, c.Stock}
			}))},
		{name: "listProducts", method: "GET", route: "/v1/products", status: 200, serve: (*Server).listProducts},
		{name: "getProduct", method: "GET", route: "/v1/products/{id}", status: 200, serve: (*Server).getProduct},
		{name: "updateProduct", method: "PATCH", route: "/v1/products/{id}", status: 200, key: keyAccepted, ifMatch: true, access: app.StaffOnly,
			serve: (*Server).updateProduct, forms: forms(formOf(1, func(c app.UpdateProductCommand) canonical {
				return canonical{"product_id": id(c.ID), "if_match": versionSet(c.Expected), "name": c.Name, "price_cents": c.PriceCents}
			}), legacyForm("PATCH", "/v1/products/{id}", func(c app.UpdateProductCommand) uuid.UUID { return c.ID }, func(c app.UpdateProductCommand) any {
				return struct {
					ID         uuid.UUID
					Expected   []int64
					Name       *string
					PriceCents *int64
				}{c.ID, versionList(c.Expected), c.Name, c.PriceCents}
			}))},
		{name: "getStock", method: "GET", route: "/v1/products/{id}/stock", status: 200, serve: (*Server).getStock},
		{name: "adjustStock", method: "POST", route: "/v1/products/{id}/stock-adjustments", status: 201, key: keyRequired, access: app.StaffOnly,
			serve: (*Server).adjustStock, forms: forms(formOf(1, func(c app.AdjustStockCommand) canonical {
				return canonical{"product_id": id(c.ProductID), "delta": c.Delta, "reason": c.Reason}
			}), legacyForm("POST", "/v1/products/{id}/stock-adjustments", func(c app.AdjustStockCommand) uuid.UUID { return c.ProductID }, func(c app.AdjustStockCommand) any {
				return struct {
					ProductID uuid.UUID
					Delta     int64
					Reason    string
				}{c.ProductID, c.Delta, c.Reason}
			}))},
		{name: "listStock", method: "GET", route: "/v1/stock", status: 200, serve: (*Server).listStock},
	}
}

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
	return keyed(s, op, createProductIn.command, s.app.CreateProduct().Handle, entity(toProductJSON, op.route))
}

func (s *Server) getProduct(operation) http.Handler {
	return getOne(s, s.app.GetProduct().Handle, toProductJSON)
}

func (s *Server) listProducts(operation) http.Handler {
	return listPage(s, s.app.ListProducts().Handle, (*domain.Product).ID, toProductJSON)
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
	}, s.app.UpdateProduct().Handle, entity(toProductJSON, ""))
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
	return keyed(s, op, adjustStockIn.command, s.app.AdjustStock().Handle, func(a app.StockAdjusted) (any, map[string]string) {
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
	return getOne(s, s.app.GetStock().Handle, toStockLevelJSON)
}

func (s *Server) listStock(operation) http.Handler {
	return listPage(s, s.app.ListStock().Handle, (*domain.StockLevel).ProductID, toStockLevelJSON)
}
