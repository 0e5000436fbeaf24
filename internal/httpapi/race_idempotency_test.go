package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// adjustPath is the stock-adjustment route of product id.
func adjustPath(id string) string { return "/v1/products/" + id + "/stock-adjustments" }

// stockOf reads a product's stock straight from the database.
func stockOf(e *httpkit.Env, id string) int64 {
	return e.QueryInt(`SELECT stock FROM stock_levels WHERE product_id = $1`, id)
}

// adjustmentRows counts the stock_adjustments rows of a product.
func adjustmentRows(e *httpkit.Env, id string) int64 {
	return e.QueryInt(`SELECT count(*) FROM stock_adjustments WHERE product_id = $1`, id)
}

// replayed says whether a response is a stored replay.
func replayed(r *httpkit.Response) bool { return r.Header.Get("Idempotent-Replayed") == "true" }

// ---- 50 duplicates, one key

// raceSameKeyAdjust sends 50 concurrent stock adjustments that carry the same
// Idempotency-Key and the same body, and returns the broken invariants
// (EXT.IDEMPOTENCY.REPLAY.001): the adjustment applies exactly once, exactly
// one answer is fresh and the other 49 are replays marked
// Idempotent-Replayed, and every answer has the same status and body.
//
// Patterns and rule ids: docs/patterns.md.
func raceSameKeyAdjust(t *testing.T, e *httpkit.Env) []string {
	const n = 50
	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
	res := make([]*httpkit.Response, n)
	done := adjustMeet(8).Arm(t, e.Env)
	testkit.Race(n, func(i int) {
		res[i] = e.Do("POST", adjustPath(id), e.Staff.Token, map[string]any{"delta": 5, "reason": "restock"},
			"Idempotency-Key", "restock-2024-06-01")
	})
	done()
	var broken []string
	fresh, replays := 0, 0
	answers := map[string]int{} // status and body -> how many got it
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("request %d: %v", i, r.Err)
		}
		answers[fmt.Sprintf("%d %s", r.Status, r.Body)]++
		if r.Status != http.StatusCreated {
			broken = append(broken, fmt.Sprintf("request %d answered %d %s, want 201", i, r.Status, r.Body))
			continue
		}
		if replayed(r) {
			replays++
		} else {
			fresh++
		}
	}
	if len(answers) != 1 {
		broken = append(broken, fmt.Sprintf("the %d answers disagree: %d different status and body pairs", n, len(answers)))
	}
	if fresh != 1 || replays != n-1 {
		broken = append(broken, fmt.Sprintf("%d fresh answers and %d replays, want 1 and %d", fresh, replays, n-1))
	}
	if s := stockOf(e, id); s != 15 {
		broken = append(broken, fmt.Sprintf("stock is %d after one +5 adjustment sent %d times, want 15", s, n))
	}
	if rows := adjustmentRows(e, id); rows != 1 {
		broken = append(broken, fmt.Sprintf("%d stock_adjustments rows, want 1", rows))
	}
	return broken
}

// TestRaceSameKeyAdjustmentAppliesOnce: 50 concurrent retries of one stock
// adjustment (same key, same body) change the stock exactly once and all get
// the same answer, one fresh and 49 replayed (EXT.IDEMPOTENCY.REPLAY.001,
// EXT.IDEMPOTENCY.KEY.001: the claim is a unique-key insert in the business
// transaction, so the losers wait for the winner and replay it). The naive
// variant checks for a record with a plain SELECT and inserts it at the end
// (check-then-act) and is shown to apply the adjustment more than once. Both
// runs meet after the stock UPDATE: guarded, the first request is held there
// with its claim on the key, and 7 others wait on that claim; naive, they
// wait on the product row instead, each about to apply the adjustment again.
// The in-process key latch is off in both runs, so that the duplicates meet
// in the database as they do across replicas (the latch has its own test).
//
// Patterns and rule ids: docs/patterns.md.
func TestRaceSameKeyAdjustmentAppliesOnce(t *testing.T) {
	t.Parallel()
	t.Run("guarded", func(t *testing.T) {
		t.Parallel()
		for _, b := range raceSameKeyAdjust(t, httpkit.New(t, testkit.Options{NoKeyLatch: true})) {
			t.Error(b)
		}
	})
	t.Run("naive check-then-act key store is caught", func(t *testing.T) {
		t.Parallel()
		e := httpkit.New(t, testkit.Options{NoKeyLatch: true, Wrap: withNaiveKeys()})
		broken := raceSameKeyAdjust(t, e)
		if len(broken) == 0 {
			t.Fatal("the naive key store kept the invariant: the test cannot tell a unique claim from check-then-act")
		}
		t.Logf("naive variant broke the invariant as expected: %v", broken)
	})
}

// withNaiveKeys swaps the key store for a naiveKeyStore.
func withNaiveKeys() func(app.Transactor) app.Transactor {
	return func(inner app.Transactor) app.Transactor {
		return testkit.Override{Inner: inner, Keys: func(tx app.Repositories) app.KeyStore {
			return naiveKeyStore{db: testkit.Conn(tx)}
		}}
	}
}

// adjustMeet is a stock adjustment's meeting point: after its UPDATE of the
// stock (guarded: with the row lock), before its stock_adjustments row.
func adjustMeet(n int) testkit.Meet {
	return testkit.Meet{Where: testkit.Before, Statement: "StockAdjustmentInsert", N: n}
}

// naiveKeyStore is the classic broken idempotency store: Claim looks for a
// record with a plain SELECT and goes ahead when there is none; Complete
// inserts the record and ignores a conflict. Two requests that both look
// before either commits both execute.
type naiveKeyStore struct {
	db dbsqlc.DBTX
}

func (s naiveKeyStore) Claim(ctx context.Context, k app.Key) (*app.Receipt, error) {
	var (
		fp      []byte
		status  int32
		headers []byte
		body    []byte
	)
	err := s.db.QueryRow(ctx, `SELECT fingerprint, response_status, response_headers, response_body
		FROM idempotency_keys WHERE actor_id = $1 AND operation = $2 AND key = $3`,
		k.ActorID, k.Operation, k.Value).Scan(&fp, &status, &headers, &body)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(fp, k.Fingerprint[:]) {
		return nil, app.ErrKeyReused
	}
	r := &app.Receipt{Status: int(status), Body: body}
	if err := json.Unmarshal(headers, &r.Header); err != nil {
		return nil, err
	}
	return r, nil
}

func (s naiveKeyStore) Complete(ctx context.Context, k app.Key, r app.Receipt) error {
	headers, err := json.Marshal(r.Header)
	if err != nil {
		return err
	}
	_, err = s.db.Exec(ctx, `INSERT INTO idempotency_keys
		(actor_id, operation, key, fingerprint, state, response_status, response_headers, response_body, expires_at)
		VALUES ($1, $2, $3, $4, 'completed', $5, $6, $7, now() + interval '1 day')
		ON CONFLICT (actor_id, operation, key) DO NOTHING`,
		k.ActorID, k.Operation, k.Value, k.Fingerprint[:], r.Status, headers, r.Body)
	return err
}

// ---- a duplicate while the original is in flight

// keysEnv is a service with the real key store, or with naiveKeyStore,
// without the in-process key latch: duplicates meet in the database, as
// they do when they reach different replicas.
func keysEnv(t *testing.T, keyWait time.Duration, naiveKeys bool) *httpkit.Env {
	o := testkit.Options{KeyWait: keyWait, NoKeyLatch: true}
	if naiveKeys {
		o.Wrap = withNaiveKeys()
	}
	return httpkit.New(t, o)
}

// raceDuplicateInFlight sends an adjustment, holds it after its stock UPDATE
// with its transaction open, and sends the same request again; the original
// goes on once the duplicate waits for a lock behind it. It returns the
// broken invariants (EXT.IDEMPOTENCY.REPLAY.001): the duplicate waits for
// the original and replays its answer, and the stock changes once.
//
// Patterns and rule ids: docs/patterns.md.
func raceDuplicateInFlight(t *testing.T, e *httpkit.Env) []string {
	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
	send := func() *httpkit.Response {
		return e.Do("POST", adjustPath(id), e.Staff.Token, map[string]any{"delta": 3, "reason": "late delivery"},
			"Idempotency-Key", "delivery-77")
	}
	il := e.Interleave(testkit.After, "StockAdjust", 2)
	first := make(chan *httpkit.Response, 1)
	go func() { first <- send() }()
	select {
	case <-il.Arrived():
	case <-time.After(10 * time.Second):
		t.Fatal("the original request never reached its business write")
	}
	dup := send()
	orig := <-first
	held, waiting := il.Wait(t)
	t.Logf("the original was held after its UPDATE until %d request waited for a lock behind it (held %d)", waiting, held)

	var broken []string
	if orig.Status != http.StatusCreated || replayed(orig) {
		broken = append(broken, fmt.Sprintf("original answered %d (replayed %v) %s, want a fresh 201", orig.Status, replayed(orig), orig.Body))
	}
	if dup.Status != http.StatusCreated || !replayed(dup) {
		broken = append(broken, fmt.Sprintf("in-flight duplicate answered %d (replayed %v) %s, want a replayed 201", dup.Status, replayed(dup), dup.Body))
	}
	if !bytes.Equal(orig.Body, dup.Body) {
		broken = append(broken, fmt.Sprintf("duplicate answered %s, original %s", dup.Body, orig.Body))
	}
	if s := stockOf(e, id); s != 13 {
		broken = append(broken, fmt.Sprintf("stock is %d after one +3 adjustment sent twice, want 13", s))
	}
	return broken
}

// TestRaceDuplicateInFlightWaitsThenReplays: a retry that arrives while the
// original is still in its transaction waits for it and replays its answer
// instead of running again (EXT.IDEMPOTENCY.REPLAY.001: the duplicate's
// claim blocks on the original's uncommitted key row). The naive
// check-then-act key store is shown to run the duplicate a second time.
//
// Patterns and rule ids: docs/patterns.md.
func TestRaceDuplicateInFlightWaitsThenReplays(t *testing.T) {
	t.Parallel()
	t.Run("guarded", func(t *testing.T) {
		t.Parallel()
		for _, b := range raceDuplicateInFlight(t, keysEnv(t, 5*time.Second, false)) {
			t.Error(b)
		}
	})
	t.Run("naive check-then-act key store is caught", func(t *testing.T) {
		t.Parallel()
		broken := raceDuplicateInFlight(t, keysEnv(t, 5*time.Second, true))
		if len(broken) == 0 {
			t.Fatal("the naive key store kept the invariant: the test cannot tell a waiting claim from check-then-act")
		}
		t.Logf("naive variant broke the invariant as expected: %v", broken)
	})
}

// TestRaceDuplicateInFlightPastWaitIsInProgress: when the original is still
// in flight after IDEMPOTENCY_WAIT, the duplicate gets 409
// idempotency_in_progress with Retry-After and changes nothing; once the
// original has finished, the same retry replays it
// (EXT.IDEMPOTENCY.REPLAY.001: "reports in-progress status"). The original is
// held after its stock UPDATE until the duplicate has its answer.
//
// Patterns and rule ids: docs/patterns.md.
func TestRaceDuplicateInFlightPastWaitIsInProgress(t *testing.T) {
	t.Parallel()
	e := keysEnv(t, 100*time.Millisecond, false)
	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
	send := func() *httpkit.Response {
		return e.Do("POST", adjustPath(id), e.Staff.Token, map[string]any{"delta": 2, "reason": "found in the back"},
			"Idempotency-Key", `"found-2"`)
	}
	stop := e.Hooks.Stop(testkit.After, "StockAdjust")
	first := make(chan *httpkit.Response, 1)
	go func() { first <- send() }()
	stop.WaitArrived(t, 10*time.Second)
	busy := send()
	stop.Release()
	if busy.Status != http.StatusConflict || busy.Code() != "idempotency_in_progress" {
		t.Fatalf("duplicate past the wait: %d %s, want 409 idempotency_in_progress", busy.Status, busy.Body)
	}
	if ra, err := strconv.Atoi(busy.Header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("Retry-After = %q, want a positive number of seconds", busy.Header.Get("Retry-After"))
	}
	orig := <-first
	if orig.Status != http.StatusCreated {
		t.Fatalf("original: %d %s", orig.Status, orig.Body)
	}
	again := send()
	if again.Status != http.StatusCreated || !replayed(again) || !bytes.Equal(again.Body, orig.Body) {
		t.Errorf("retry after the original finished: %d (replayed %v) %s, want the original's 201 %s replayed",
			again.Status, replayed(again), again.Body, orig.Body)
	}
	if s := stockOf(e, id); s != 12 {
		t.Errorf("stock is %d, want 12: the adjustment must apply exactly once", s)
	}
}
