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

func renderProduct(status int, withLocation bool) func(*domain.Product) (app.Receipt, error) {
	return func(p *domain.Product) (app.Receipt, error) {
		h := map[string]string{"ETag": etag(p.Version())}
		if withLocation {
			h["Location"] = "/v1/products/" + p.ID().String()
		}
		return receipt(status, toProductJSON(p), h)
	}
}

type createProductIn struct {
	SKU        *string `json:"sku"`
	Name       *string `json:"name"`
	PriceCents *int64  `json:"price_cents"`
	Stock      *int64  `json:"stock"`
}

func (s *Server) createProduct(w http.ResponseWriter, r *http.Request) error {
	var in createProductIn
	if err := decode(w, r, &in, false); err != nil {
		return err
	}
	var v domain.Validation
	required(&v, "sku", in.SKU)
	required(&v, "name", in.Name)
	required(&v, "price_cents", in.PriceCents)
	if err := v.Err(); err != nil {
		return err
	}
	cmd := app.CreateProductCommand{SKU: *in.SKU, Name: *in.Name, PriceCents: *in.PriceCents}
	if in.Stock != nil {
		cmd.Stock = *in.Stock
	}
	pr := principal(r)
	key, err := s.idempotencyKey(r, pr, "createProduct", keyAccepted, cmd)
	if err != nil {
		return err
	}
	out, err := s.app.CreateProduct.Handle(r.Context(), cmd, app.Call[*domain.Product]{Principal: pr, Key: key, Render: renderProduct(http.StatusCreated, true)})
	return s.respond(w, "createProduct", out, err)
}

func (s *Server) getProduct(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	p, err := s.app.GetProduct.Handle(r.Context(), id, seenVersion(r.Header.Values("If-None-Match")))
	if err != nil {
		return err
	}
	if notModified(w, r, p.Version()) {
		return nil
	}
	return writeJSON(w, http.StatusOK, toProductJSON(p))
}

func (s *Server) listProducts(w http.ResponseWriter, r *http.Request) error {
	page, err := pageOf(r)
	if err != nil {
		return err
	}
	want := page.Limit
	page.Limit++
	ps, err := s.app.ListProducts.Handle(r.Context(), page)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, newList(ps, want, (*domain.Product).ID, toProductJSON))
}

type updateProductIn struct {
	Name       *string `json:"name"`
	PriceCents *int64  `json:"price_cents"`
}

func (s *Server) updateProduct(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var in updateProductIn
	if err := decode(w, r, &in, false); err != nil {
		return err
	}
	pr := principal(r)
	// The key is checked before the precondition, so that a retried PATCH
	// whose first response was lost replays its 200 instead of a 409.
	pre := parseIfMatch(r.Header.Values("If-Match"))
	cmd := app.UpdateProductCommand{ID: id, Expected: pre.versions, Name: in.Name, PriceCents: in.PriceCents}
	key, err := s.idempotencyKey(r, pr, "updateProduct", keyAccepted, cmd)
	if err != nil {
		return err
	}
	if err := pre.err(); err != nil {
		return err
	}
	out, err := s.app.UpdateProduct.Handle(r.Context(), cmd, app.Call[*domain.Product]{Principal: pr, Key: key, Render: renderProduct(http.StatusOK, false)})
	return s.respond(w, "updateProduct", out, err)
}

type adjustStockIn struct {
	Delta  *int64  `json:"delta"`
	Reason *string `json:"reason"`
}

type stockAdjustedJSON struct {
	ProductID uuid.UUID `json:"product_id"`
	Delta     int64     `json:"delta"`
	Reason    string    `json:"reason"`
	Stock     int64     `json:"stock"`
}

func (s *Server) adjustStock(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	pr := principal(r)
	if err := keyPresent(r); err != nil {
		return err
	}
	var in adjustStockIn
	if err := decode(w, r, &in, false); err != nil {
		return err
	}
	var v domain.Validation
	required(&v, "delta", in.Delta)
	required(&v, "reason", in.Reason)
	if err := v.Err(); err != nil {
		return err
	}
	cmd := app.AdjustStockCommand{ProductID: id, Delta: *in.Delta, Reason: *in.Reason}
	key, err := s.idempotencyKey(r, pr, "adjustStock", keyRequired, cmd)
	if err != nil {
		return err
	}
	out, err := s.app.AdjustStock.Handle(r.Context(), cmd, app.Call[app.StockAdjusted]{Principal: pr, Key: key,
		Render: func(a app.StockAdjusted) (app.Receipt, error) {
			return receipt(http.StatusCreated, stockAdjustedJSON{
				ProductID: a.Level.ProductID(), Delta: a.Adjustment.Delta, Reason: a.Adjustment.Reason, Stock: a.Level.Stock(),
			}, nil)
		}})
	return s.respond(w, "adjustStock", out, err)
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
func (s *Server) getStock(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	level, err := s.app.GetStock.Handle(r.Context(), id, seenVersion(r.Header.Values("If-None-Match")))
	if err != nil {
		return err
	}
	if notModified(w, r, level.Version()) {
		return nil
	}
	return writeJSON(w, http.StatusOK, toStockLevelJSON(level))
}

func (s *Server) listStock(w http.ResponseWriter, r *http.Request) error {
	page, err := pageOf(r)
	if err != nil {
		return err
	}
	want := page.Limit
	page.Limit++
	levels, err := s.app.ListStock.Handle(r.Context(), page)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, newList(levels, want, (*domain.StockLevel).ProductID, toStockLevelJSON))
}

// required records a missing required field.
func required[T any](v *domain.Validation, field string, p *T) {
	if p == nil {
		v.Add(field, "is required")
	}
}
