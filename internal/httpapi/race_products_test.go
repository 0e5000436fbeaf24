package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// racePatchSameETag sends 20 concurrent PATCHes that all carry the ETag of
// version 1 and returns the broken invariants: exactly one may win
// (EXT.CONCURRENCY.VERSION.001), every other gets 409 version_conflict, and
// the product's version advanced exactly once.
//
// Patterns and rule ids: docs/patterns.md.
func racePatchSameETag(t *testing.T, e *httpkit.Env, m testkit.Meet) []string {
	const n = 20
	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 5})
	statuses := make([]int, n)
	done := m.Arm(t, e.Env)
	defer done()
	testkit.Race(n, func(i int) {
		res := e.Do("PATCH", "/v1/products/"+id, e.Staff.Token, map[string]any{"name": fmt.Sprintf("name %d", i)}, "If-Match", `"v1"`)
		statuses[i] = res.Status
		if res.Status != http.StatusOK && res.Code() != "version_conflict" {
			t.Errorf("PATCH %d: %d %s", i, res.Status, res.Body)
		}
	})
	var broken []string
	ok := count(statuses, http.StatusOK)
	if ok != 1 {
		broken = append(broken, fmt.Sprintf("%d of %d PATCHes with the same ETag succeeded, want exactly 1", ok, n))
	}
	if v := e.QueryInt(`SELECT version FROM products WHERE id = $1`, id); v != 2 {
		broken = append(broken, fmt.Sprintf("version is %d after one accepted PATCH, want 2", v))
	}
	return broken
}

// TestRacePatchSameETagExactlyOneWins: guarded, the first PATCH is held
// after its version-guarded UPDATE, with the row lock, until 7 others wait on
// it; the naive update checks the version in the application, and 8 meet
// before writing.
func TestRacePatchSameETagExactlyOneWins(t *testing.T) {
	t.Parallel()
	t.Run("guarded", func(t *testing.T) {
		t.Parallel()
		for _, b := range racePatchSameETag(t, httpkit.New(t), testkit.Meet{Where: testkit.After, Statement: "ProductUpdate", N: 8}) {
			t.Error(b)
		}
	})
	t.Run("naive read-modify-write is caught", func(t *testing.T) {
		t.Parallel()
		e := httpkit.New(t, testkit.Options{Wrap: func(inner app.Transactor) app.Transactor {
			return testkit.Override{Inner: inner, Products: func(tx app.Repositories) app.ProductRepo {
				return naiveProductUpdate{ProductRepo: tx.Products(), db: testkit.Conn(tx)}
			}}
		}})
		if broken := racePatchSameETag(t, e, testkit.Meet{Where: testkit.Before, Statement: "NaiveProductUpdate", N: 8}); len(broken) == 0 {
			t.Fatal("the naive variant kept the invariant: the test cannot tell a guarded update from a lost update")
		} else {
			t.Logf("naive variant broke the invariant as expected: %v", broken)
		}
	})
}

// naiveProductUpdate checks the version in the application and then writes
// without a version guard: the classic lost update.
type naiveProductUpdate struct {
	app.ProductRepo
	db dbsqlc.DBTX
}

func (n naiveProductUpdate) Update(ctx context.Context, id uuid.UUID, expected domain.Version, patch domain.ProductPatch) (*domain.Product, error) {
	var version int64
	if err := n.db.QueryRow(ctx, `SELECT version FROM products WHERE id = $1`, id).Scan(&version); err != nil {
		return nil, err
	}
	if domain.Version(version) != expected {
		return nil, domain.ErrVersionConflict
	}
	if _, err := n.db.Exec(ctx, "-- name: NaiveProductUpdate\nUPDATE products SET name = COALESCE($2, name), version = $3 + 1 WHERE id = $1", id, patch.Name, version); err != nil {
		return nil, err
	}
	return n.Get(ctx, id)
}

func count(xs []int, v int) int {
	n := 0
	for _, x := range xs {
		if x == v {
			n++
		}
	}
	return n
}

// ---- editing a product while it sells

// editWhileSelling makes 20 price edits of one product, each with the ETag of
// a GET just before it, while 200 single-unit placements of that product run
// from 8 customers. The interleaving is forced, not hoped for: the
// placements wait at a gate in cohorts of 10, each edit opens one cohort
// after its GET and sends its PATCH only once an order of that cohort has
// been placed, so at least one sale always commits between an edit's read
// and its write (and the rest of the cohort are in flight around the PATCH).
//
// It returns the figures and the broken invariants: every edit succeeds at
// its first attempt (a sale and a price edit do not conflict,
// EXT.CONCURRENCY.ADOPT.001), every placement succeeds, every order's unit
// price is one of the prices in effect, and the stock adds up.
//
// Patterns and rule ids: docs/patterns.md.
func editWhileSelling(t *testing.T, e *httpkit.Env) (editWhileSellingFigures, []string) {
	const edits, cohort, firstPrice = 20, 10, 1000
	const sales = edits * cohort
	product := e.NewProduct(testkit.ProductSpec{PriceCents: firstPrice, Stock: sales})
	customers := make([]testkit.Actor, 8)
	for i := range customers {
		customers[i] = e.NewCustomer(100_000_000)
	}

	found := &testkit.Findings{}
	release := make([]chan struct{}, edits)
	sold := make([]chan struct{}, edits)
	once := make([]sync.Once, edits)
	for k := range release {
		release[k], sold[k] = make(chan struct{}), make(chan struct{})
	}
	placed := make([]int, sales)
	var wg sync.WaitGroup
	for i := range sales {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := i / cohort
			<-release[k]
			res := e.PlaceOrder(customers[i%len(customers)].Token, fmt.Sprintf("sale-%d", i), testkit.Line(product, 1))
			placed[i] = res.Status
			if res.Status != http.StatusCreated {
				found.Add("placement %d: %d %s", i, res.Status, res.Body)
			}
			once[k].Do(func() { close(sold[k]) })
		}()
	}

	inEffect := map[int64]bool{firstPrice: true}
	var fig editWhileSellingFigures
	fig.Edits = edits
	for k := range edits {
		got := e.Do("GET", "/v1/products/"+product, e.Staff.Token, nil)
		if got.Status != http.StatusOK {
			t.Fatalf("GET before edit %d: %d %s", k, got.Status, got.Body)
		}
		close(release[k]) // the gate: a cohort of sales starts after the GET…
		<-sold[k]         // …and one of them is done before the PATCH
		price := int64(firstPrice + k + 1)
		res := e.Do("PATCH", "/v1/products/"+product, e.Staff.Token, map[string]any{"price_cents": price},
			"If-Match", got.Header.Get("ETag"))
		switch {
		case res.Status == http.StatusOK:
			fig.FirstAttemptOK++
			inEffect[price] = true
		case res.Code() == "version_conflict":
			fig.Conflicts++
		default:
			found.Add("edit %d: %d %s", k, res.Status, res.Body)
		}
	}
	wg.Wait()
	fig.Orders = count(placed, http.StatusCreated)

	var broken []string
	rows, err := e.Pool.Query(t.Context(), `SELECT unit_price_cents, count(*) FROM order_lines WHERE product_id = $1 GROUP BY 1 ORDER BY 1`, product)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var price, n int64
		if err := rows.Scan(&price, &n); err != nil {
			t.Fatal(err)
		}
		fig.PricesSeen++
		if !inEffect[price] {
			broken = append(broken, fmt.Sprintf("%d orders at %d cents, a price never in effect", n, price))
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	fig.PricesInEffect = len(inEffect)
	t.Logf("edits tried %d, succeeded at first attempt %d, version conflicts %d; orders %d of %d; prices in effect %d, seen on orders %d",
		fig.Edits, fig.FirstAttemptOK, fig.Conflicts, fig.Orders, sales, fig.PricesInEffect, fig.PricesSeen)

	if fig.FirstAttemptOK != edits {
		broken = append(broken, fmt.Sprintf("%d of %d edits succeeded at their first attempt, %d got version_conflict from a sale", fig.FirstAttemptOK, edits, fig.Conflicts))
	}
	if fig.Orders != sales {
		broken = append(broken, fmt.Sprintf("%d of %d placements succeeded", fig.Orders, sales))
	}
	if left := e.QueryInt(`SELECT stock FROM stock_levels WHERE product_id = $1`, product); left != int64(sales-fig.Orders) {
		broken = append(broken, fmt.Sprintf("stock %d after %d sales from %d", left, fig.Orders, sales))
	}
	return fig, append(broken, found.List()...)
}

type editWhileSellingFigures struct {
	Edits, FirstAttemptOK, Conflicts, Orders, PricesInEffect, PricesSeen int
}

// TestRaceEditProductWhileItSells: staff edit a product's price while it
// sells. The product's version covers the catalogue only, so every edit made
// with a fresh ETag wins at once, and each order's price is the catalogue
// price read by its placement. The naive variant is the old single version,
// which every stock write advanced: its edits lose to the sales.
func TestRaceEditProductWhileItSells(t *testing.T) {
	t.Parallel()
	t.Run("guarded", func(t *testing.T) {
		t.Parallel()
		_, broken := editWhileSelling(t, httpkit.New(t))
		for _, b := range broken {
			t.Error(b)
		}
	})
	t.Run("naive single version is caught", func(t *testing.T) {
		t.Parallel()
		e := httpkit.New(t, testkit.Options{Wrap: func(inner app.Transactor) app.Transactor {
			return testkit.Override{Inner: inner,
				Placement: func(tx app.Repositories) app.PlacementStore {
					return singleVersionPlacement{PlacementStore: tx.Placement(), db: testkit.Conn(tx)}
				},
				Stock: func(tx app.Repositories) app.StockRepo {
					return singleVersionStock{StockRepo: tx.Stock(), db: testkit.Conn(tx)}
				}}
		}})
		fig, broken := editWhileSelling(t, e)
		if len(broken) == 0 {
			t.Fatal("the naive variant kept the invariant: the test cannot tell one version per aggregate from one for both")
		}
		if fig.FirstAttemptOK*2 > fig.Edits {
			t.Errorf("naive: %d of %d edits won at their first attempt, want most to get version_conflict", fig.FirstAttemptOK, fig.Edits)
		}
		t.Logf("naive variant broke the invariant as expected: %v", broken)
	})
}

// singleVersionStock and singleVersionPlacement are the design before stock
// levels had a version of their own: every stock write also advances the
// product's version, so a sale makes the ETag of a price edit stale. The
// placement runs the real pipelined statements, then that UPDATE.
type singleVersionStock struct {
	app.StockRepo
	db dbsqlc.DBTX
}

func (s singleVersionStock) AddStock(ctx context.Context, deltas map[uuid.UUID]int64) error {
	if err := s.StockRepo.AddStock(ctx, deltas); err != nil {
		return err
	}
	return bumpProductVersions(ctx, s.db, deltas)
}

type singleVersionPlacement struct {
	app.PlacementStore
	db dbsqlc.DBTX
}

func (s singleVersionPlacement) WritePlacement(ctx context.Context, o *domain.Order, take map[uuid.UUID]int64) (*domain.Order, error) {
	placed, err := s.PlacementStore.WritePlacement(ctx, o, take)
	if err != nil {
		return nil, err
	}
	return placed, bumpProductVersions(ctx, s.db, take)
}

func bumpProductVersions(ctx context.Context, db dbsqlc.DBTX, deltas map[uuid.UUID]int64) error {
	ids := make([]uuid.UUID, 0, len(deltas))
	for id := range deltas {
		ids = append(ids, id)
	}
	_, err := db.Exec(ctx, "-- name: NaiveBumpProductVersion\nUPDATE products SET version = version + 1, updated_at = now() WHERE id = ANY($1)", ids)
	return err
}

func (s singleVersionStock) Adjust(ctx context.Context, actorID uuid.UUID, adj domain.StockAdjustment) (*domain.StockLevel, error) {
	level, err := s.StockRepo.Adjust(ctx, actorID, adj)
	if err != nil {
		return nil, err
	}
	return level, bumpProductVersions(ctx, s.db, map[uuid.UUID]int64{adj.ProductID: adj.Delta})
}

// ---- a catalogue edit and a placement never wait for each other

// editAndSaleDoNotWait holds a placement with its transaction open right
// after the statement named holdSale (its locks taken) and sends a price
// edit; then holds an edit after its UPDATE (the product row locked, the new
// price uncommitted) and places an order. Neither may wait for the other: a
// write that needed the other's lock could not finish while the other is
// held, and would end in 503 after the pool's lock_timeout. Each order takes
// the price committed when its placement read it.
func editAndSaleDoNotWait(t *testing.T, e *httpkit.Env, holdSale string) []string {
	var broken []string
	product := e.NewProduct(testkit.ProductSpec{PriceCents: 1000, Stock: 10})
	customer := e.NewCustomer(1_000_000)
	place := func(key string) <-chan *httpkit.Response {
		out := make(chan *httpkit.Response, 1)
		go func() { out <- e.PlaceOrder(customer.Token, key, testkit.Line(product, 1)) }()
		return out
	}
	edit := func(price int64, etag string) <-chan *httpkit.Response {
		out := make(chan *httpkit.Response, 1)
		go func() {
			out <- e.Do("PATCH", "/v1/products/"+product, e.Staff.Token, map[string]any{"price_cents": price}, "If-Match", etag)
		}()
		return out
	}
	unitPrice := func(r *httpkit.Response) int64 {
		var o struct {
			Lines []struct {
				UnitPriceCents int64 `json:"unit_price_cents"`
			} `json:"lines"`
		}
		if err := json.Unmarshal(r.Body, &o); err != nil || len(o.Lines) != 1 {
			t.Fatalf("order body %s: %v", r.Body, err)
		}
		return o.Lines[0].UnitPriceCents
	}

	// A placement holds its locks; an edit comes in.
	sale := e.Hooks.StopFirst(testkit.After, holdSale, 1)
	sold := place("held-sale")
	sale.WaitArrived(t, 15*time.Second)
	edited := <-edit(1100, `"v1"`)
	if edited.Status != http.StatusOK {
		broken = append(broken, fmt.Sprintf("price edit while a placement held its locks: %d %s", edited.Status, edited.Body))
	}
	sale.Release()
	if r := <-sold; r.Status != http.StatusCreated {
		broken = append(broken, fmt.Sprintf("held placement: %d %s", r.Status, r.Body))
	} else if p := unitPrice(r); p != 1000 {
		broken = append(broken, fmt.Sprintf("held placement took %d cents, want 1000, the price when it read it", p))
	}

	// An edit holds the product row; a placement comes in.
	update := e.Hooks.StopFirst(testkit.After, "ProductUpdate", 1)
	etag := e.Do("GET", "/v1/products/"+product, e.Staff.Token, nil).Header.Get("ETag")
	editing := edit(1200, etag)
	update.WaitArrived(t, 15*time.Second)
	r := <-place("during-edit")
	if r.Status != http.StatusCreated {
		broken = append(broken, fmt.Sprintf("placement while an edit held the product row: %d %s", r.Status, r.Body))
	} else if p := unitPrice(r); p != 1100 && edited.Status == http.StatusOK {
		broken = append(broken, fmt.Sprintf("placement during an uncommitted edit took %d cents, want 1100, the committed price", p))
	}
	update.Release()
	if r := <-editing; r.Status != http.StatusOK {
		broken = append(broken, fmt.Sprintf("held edit: %d %s", r.Status, r.Body))
	}
	return broken
}

// TestCatalogueEditAndPlacementNeverWait: placement locks stock rows only
// and reads the price without a lock, so a PATCH never waits for a
// placement and a placement never waits for a PATCH (ADR 0006). The naive
// variant also locks the product rows, as placement did when stock lived in
// them: each then waits for the other until lock_timeout.
func TestCatalogueEditAndPlacementNeverWait(t *testing.T) {
	t.Parallel()
	t.Run("guarded", func(t *testing.T) {
		t.Parallel()
		for _, b := range editAndSaleDoNotWait(t, httpkit.New(t), "StockLockRows") {
			t.Error(b)
		}
	})
	t.Run("naive product lock is caught", func(t *testing.T) {
		t.Parallel()
		e := httpkit.New(t, testkit.Options{Wrap: func(inner app.Transactor) app.Transactor {
			return testkit.Override{Inner: inner, Placement: func(tx app.Repositories) app.PlacementStore {
				return productLockingPlacement{PlacementStore: tx.Placement(), db: testkit.Conn(tx)}
			}}
		}})
		broken := editAndSaleDoNotWait(t, e, "NaiveLockProducts")
		if len(broken) == 0 {
			t.Fatal("the naive variant kept the invariant: the test cannot tell a stock lock from a product lock")
		}
		t.Logf("naive variant broke the invariant as expected: %v", broken)
	})
}

// productLockingPlacement runs the real placement and also locks the
// product rows in id order, as placement did when the stock was a column of
// products.
type productLockingPlacement struct {
	app.PlacementStore
	db dbsqlc.DBTX
}

func (p productLockingPlacement) LockForPlacement(ctx context.Context, customer uuid.UUID, ids []uuid.UUID) (app.PlacementLocks, error) {
	locks, err := p.PlacementStore.LockForPlacement(ctx, customer, ids)
	if err != nil {
		return locks, err
	}
	_, err = p.db.Exec(ctx, "-- name: NaiveLockProducts\nSELECT id FROM products WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE", ids)
	return locks, err
}
