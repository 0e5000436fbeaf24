package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// racePatchSameETag sends 20 concurrent PATCHes that all carry the ETag of
// version 1 and returns the broken invariants: exactly one may win
// (EXT.CONCURRENCY.VERSION.001), every other gets 409 version_conflict, and
// the product's version advanced exactly once.
func racePatchSameETag(t *testing.T, e *testkit.Env, m meet) []string {
	const n = 20
	id := e.NewProduct(100, 5)
	statuses := make([]int, n)
	done := m.arm(t, e)
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
		for _, b := range racePatchSameETag(t, testkit.New(t), meet{testkit.After, "ProductUpdate", 8}) {
			t.Error(b)
		}
	})
	t.Run("naive read-modify-write is caught", func(t *testing.T) {
		t.Parallel()
		e := testkit.New(t, testkit.Options{Wrap: func(inner app.Transactor) app.Transactor {
			return testkit.Override{Inner: inner, Products: func(tx app.Tx) app.ProductRepo {
				return naiveProductUpdate{ProductRepo: tx.Products(), db: testkit.Conn(tx)}
			}}
		}})
		if broken := racePatchSameETag(t, e, meet{testkit.Before, "NaiveProductUpdate", 8}); len(broken) == 0 {
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
