package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/testkit"
	"github.com/ordersvc/ordersvc/internal/testkit/httpkit"
)

// A key is free again once its record has expired; the request that takes
// it over reclaims the row. These tests force the interleavings around that
// reclaim, and the moment from which a record's life counts.

// heldAdjust runs the real adjustment and then, for the first request after
// the hold is armed, keeps its transaction open after the write: it closes
// entered and waits for release (or for the test to end). Other requests
// pass straight through.
type heldAdjust struct {
	app.StockRepo
	h *hold
}

// hold is a one-shot gate inside a request's transaction.
type hold struct {
	armed   atomic.Bool
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func newHold(t *testing.T) *hold {
	h := &hold{entered: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(h.open)
	return h
}

// arm makes the next adjustment the held one; until then none is held.
func (h *hold) arm() { h.armed.Store(true) }

// open lets the held request go on (idempotent).
func (h *hold) open() {
	select {
	case <-h.release:
	default:
		close(h.release)
	}
}

// reached waits until the held request is at the gate.
func (h *hold) reached(t *testing.T) {
	t.Helper()
	select {
	case <-h.entered:
	case <-time.After(15 * time.Second):
		t.Fatal("the held request never reached its gate")
	}
}

func (a heldAdjust) Adjust(ctx context.Context, actorID uuid.UUID, adj domain.StockAdjustment) (*domain.StockLevel, error) {
	p, err := a.StockRepo.Adjust(ctx, actorID, adj)
	if err != nil {
		return p, err
	}
	first := false
	if a.h.armed.Load() {
		a.h.once.Do(func() { first = true })
	}
	if first {
		close(a.h.entered)
		<-a.h.release
	}
	return p, nil
}

// waitingOnLocks polls until exactly n statements on the idempotency table
// of the test's database wait on a lock, and fails after 15 s.
func waitingOnLocks(t *testing.T, e *httpkit.Env, n int64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := e.QueryInt(`SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'
			  AND query ILIKE '%idempotency_keys%'`)
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d statements wait on an idempotency record's lock, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// reclaimRace forces the interleaving of two requests, A and B, that both
// find the key's record expired: a transaction of the test holds the expired
// row's lock until A and then B are both queued on it in their reclaim, so
// that A takes the row over and B waits on A. A is then held in its
// transaction after its write, until B has answered or patience has passed.
func reclaimRace(t *testing.T, e *httpkit.Env, h *hold, patience time.Duration) (a, b *httpkit.Response, product string) {
	t.Helper()
	id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
	send := func() *httpkit.Response { return adjust(e, e.Staff.Token, id, 4, "recount-7") }
	wantFresh(t, "first adjustment", send(), http.StatusCreated) // the hold is for reclaimers only
	e.Exec(`UPDATE idempotency_keys SET expires_at = now() - interval '1 second'`)

	ctx := context.Background()
	lock, err := e.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(ctx) }()
	if _, err := lock.Exec(ctx, `SELECT 1 FROM idempotency_keys FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	h.arm()
	ach, bch := make(chan *httpkit.Response, 1), make(chan *httpkit.Response, 1)
	go func() { ach <- send() }()
	waitingOnLocks(t, e, 1) // A is first in the row's queue
	go func() { bch <- send() }()
	waitingOnLocks(t, e, 2) // then B
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	h.reached(t) // A took the row over and wrote; B now waits on A
	select {
	case b = <-bch:
	case <-time.After(patience):
	}
	h.open()
	if a = <-ach; b == nil {
		b = <-bch
	}
	return a, b, id
}

// TestReclaimedKeyDuplicateWaitsIdempotencyWait: a duplicate that meets a
// request reclaiming an expired key waits for it like for any in-flight
// original (EXT.IDEMPOTENCY.REPLAY.001; the contract's IDEMPOTENCY_WAIT): it
// replays the original's answer when that comes within the wait, and
// answers 409 idempotency_in_progress with Retry-After when it does not;
// never 503 after DB_LOCK_TIMEOUT. The naive variant reclaims under the
// pool's lock_timeout and is shown to answer 503 in both cases. The
// in-process key latch is off: the two meet in the database, as they do
// when they reach different replicas.
//
// Patterns and rule ids: docs/patterns.md.
func TestReclaimedKeyDuplicateWaitsIdempotencyWait(t *testing.T) {
	t.Parallel()
	// replays: DB_LOCK_TIMEOUT 3 s, IDEMPOTENCY_WAIT 12 s; the original
	// is held until the duplicate has waited two DB_LOCK_TIMEOUTs. (The
	// first request's own wait on the test's row lock, until the duplicate
	// queues behind it, is bounded by them too, and so is the duplicate's
	// whole wait in the guarded run: neither is made short, so that a busy
	// machine stays well within both.)
	replays := func(t *testing.T, naive bool) []string {
		const lockTimeout, keyWait = 3 * time.Second, 12 * time.Second
		h := newHold(t)
		e := httpkit.New(t, testkit.Options{NoKeyLatch: true, LockTimeout: lockTimeout, KeyWait: keyWait, Wrap: reclaimEnv(h, naive, keyWait, lockTimeout)})
		a, b, id := reclaimRace(t, e, h, 2*lockTimeout)
		var broken []string
		if a.Status != http.StatusCreated || replayed(a) {
			broken = append(broken, fmt.Sprintf("the reclaiming request answered %d %s, want a fresh 201", a.Status, a.Body))
		}
		if b.Status != http.StatusCreated || !replayed(b) || !bytes.Equal(a.Body, b.Body) {
			broken = append(broken, fmt.Sprintf("the duplicate answered %d (replayed %v) %s, want the reclaiming request's 201 replayed", b.Status, replayed(b), b.Body))
		}
		if s := stockOf(e, id); s != 18 {
			broken = append(broken, fmt.Sprintf("stock %d, want 18 (10, +4 before expiry, +4 once after)", s))
		}
		return broken
	}
	// inProgress: IDEMPOTENCY_WAIT 5 s, DB_LOCK_TIMEOUT 10 s (below the
	// 15 s statement_timeout); the original is held until the duplicate
	// has answered.
	inProgress := func(t *testing.T, naive bool) []string {
		const lockTimeout, keyWait = 10 * time.Second, 5 * time.Second
		h := newHold(t)
		e := httpkit.New(t, testkit.Options{NoKeyLatch: true, LockTimeout: lockTimeout, KeyWait: keyWait, Wrap: reclaimEnv(h, naive, keyWait, lockTimeout)})
		a, b, id := reclaimRace(t, e, h, time.Minute)
		var broken []string
		if a.Status != http.StatusCreated || replayed(a) {
			broken = append(broken, fmt.Sprintf("the reclaiming request answered %d %s, want a fresh 201", a.Status, a.Body))
		}
		if b.Status != http.StatusConflict || b.Code() != "idempotency_in_progress" || b.Header.Get("Retry-After") == "" {
			broken = append(broken, fmt.Sprintf("the duplicate answered %d %s (Retry-After %q), want 409 idempotency_in_progress with Retry-After",
				b.Status, b.Body, b.Header.Get("Retry-After")))
		}
		if s := stockOf(e, id); s != 18 {
			broken = append(broken, fmt.Sprintf("stock %d, want 18 (10, +4 before expiry, +4 once after)", s))
		}
		return broken
	}
	for name, run := range map[string]func(*testing.T, bool) []string{"replays within the wait": replays, "in progress past the wait": inProgress} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			t.Run("guarded", func(t *testing.T) {
				t.Parallel()
				for _, b := range run(t, false) {
					t.Error(b)
				}
			})
			t.Run("naive reclaim under the pool's lock_timeout is caught", func(t *testing.T) {
				t.Parallel()
				broken := run(t, true)
				if len(broken) == 0 {
					t.Fatal("the naive reclaim kept the contract: the test cannot tell the two waits apart")
				}
				t.Logf("naive variant broke the contract as expected: %v", broken)
			})
		})
	}
}

// reclaimEnv holds the first reclaiming adjustment's transaction at h and,
// for the naive variant, swaps the key store for one that reclaims under the
// pool's lock_timeout.
func reclaimEnv(h *hold, naive bool, keyWait, lockTimeout time.Duration) func(app.Transactor) app.Transactor {
	return func(inner app.Transactor) app.Transactor {
		o := testkit.Override{Inner: inner, Stock: func(tx app.Repositories) app.StockRepo {
			return heldAdjust{StockRepo: tx.Stock(), h: h}
		}}
		if naive {
			o.Keys = func(tx app.Repositories) app.KeyStore {
				return unboundedReclaimKeys{KeyStore: tx.Keys(), db: testkit.Conn(tx), wait: keyWait, lockTimeout: lockTimeout}
			}
		}
		return o
	}
}

// unboundedReclaimKeys is the key store with its reclaim unbounded: the
// claim waits at most IDEMPOTENCY_WAIT, but the reclaim of an expired record
// runs under the pool's lock_timeout (DB_LOCK_TIMEOUT), so a duplicate that
// reclaims behind another waits that long and then fails as unavailable.
// Complete is the real one.
type unboundedReclaimKeys struct {
	app.KeyStore
	db interface {
		Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	}
	wait, lockTimeout time.Duration
}

func (s unboundedReclaimKeys) Claim(ctx context.Context, k app.Key) (*app.Receipt, error) {
	setTimeout := func(d time.Duration) error {
		_, err := s.db.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`, strconv.FormatInt(d.Milliseconds(), 10))
		return err
	}
	if err := setTimeout(s.wait); err != nil {
		return nil, err
	}
	tag, err := s.db.Exec(ctx, `INSERT INTO idempotency_keys (actor_id, operation, key, fingerprint, state, expires_at)
		VALUES ($1, $2, $3, $4, 'in_progress', now() + interval '1 day') ON CONFLICT DO NOTHING`,
		k.ActorID, k.Operation, k.Value, k.Fingerprint[:])
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "55P03" {
		return nil, &app.KeyInProgressError{RetryAfter: time.Second}
	} else if err != nil {
		return nil, err
	}
	if err := setTimeout(s.lockTimeout); err != nil {
		return nil, err
	}
	if tag.RowsAffected() == 1 {
		return nil, nil
	}
	read := func() (fp []byte, completed, expired bool, r *app.Receipt, err error) {
		var (
			state   string
			status  *int32
			headers []byte
			body    []byte
		)
		err = s.db.QueryRow(ctx, `SELECT fingerprint, state, response_status, response_headers, response_body, expires_at <= now()
			FROM idempotency_keys WHERE actor_id = $1 AND operation = $2 AND key = $3`,
			k.ActorID, k.Operation, k.Value).Scan(&fp, &state, &status, &headers, &body, &expired)
		if err != nil || state != "completed" || status == nil {
			return fp, false, expired, nil, err
		}
		r = &app.Receipt{Status: int(*status), Body: body}
		if len(headers) > 0 {
			err = json.Unmarshal(headers, &r.Header)
		}
		return fp, true, expired, r, err
	}
	fp, completed, expired, r, err := read()
	if err != nil {
		return nil, err
	}
	if expired {
		// The flaw: this UPDATE waits on a concurrent reclaimer for as
		// long as DB_LOCK_TIMEOUT, not IDEMPOTENCY_WAIT.
		tag, err := s.db.Exec(ctx, `UPDATE idempotency_keys SET fingerprint = $4, state = 'in_progress',
			response_status = NULL, response_headers = NULL, response_body = NULL,
			created_at = now(), expires_at = now() + interval '1 day'
			WHERE actor_id = $1 AND operation = $2 AND key = $3 AND expires_at <= now()`,
			k.ActorID, k.Operation, k.Value, k.Fingerprint[:])
		if err != nil {
			return nil, err
		}
		if tag.RowsAffected() == 1 {
			return nil, nil
		}
		if fp, completed, _, r, err = read(); err != nil {
			return nil, err
		}
	}
	if !bytes.Equal(fp, k.Fingerprint[:]) {
		return nil, app.ErrKeyReused
	}
	if !completed {
		return nil, &app.KeyInProgressError{RetryAfter: time.Second}
	}
	return r, nil
}

// TestKeyExpiryCountsFromCompletion: a record lives IDEMPOTENCY_TTL from
// the moment its request completed, not from its claim
// (EXT.IDEMPOTENCY.RETENTION.001), so a request that ran longer than the TTL
// is still replayed right after it answered. The original is held in its
// transaction until that transaction is older than the TTL (10 s); the
// retry then goes out as soon as the original has answered, and must reach
// the record within the TTL, which a busy machine does with room to spare.
// The naive variant completes the record without moving its expiry, which
// then still counts from the claim, and is shown to execute the retry a
// second time.
//
// Patterns and rule ids: docs/patterns.md.
func TestKeyExpiryCountsFromCompletion(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Second
	run := func(t *testing.T, naive bool) []string {
		h := newHold(t)
		e := httpkit.New(t, testkit.Options{KeyTTL: ttl, Wrap: func(inner app.Transactor) app.Transactor {
			o := testkit.Override{Inner: inner, Stock: func(tx app.Repositories) app.StockRepo {
				return heldAdjust{StockRepo: tx.Stock(), h: h}
			}}
			if naive {
				o.Keys = func(tx app.Repositories) app.KeyStore {
					return claimTimeExpiryKeys{KeyStore: tx.Keys(), db: testkit.Conn(tx)}
				}
			}
			return o
		}})
		id := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 10})
		send := func() *httpkit.Response { return adjust(e, e.Staff.Token, id, 3, "slow-count") }
		h.arm()
		first := make(chan *httpkit.Response, 1)
		go func() { first <- send() }()
		h.reached(t)
		// The gate: the original's transaction (it began with the claim)
		// has lived longer than the TTL.
		deadline := time.Now().Add(30 * time.Second)
		for e.QueryInt(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND pid <> pg_backend_pid() AND xact_start < clock_timestamp() - make_interval(secs => $1)`, (ttl+200*time.Millisecond).Seconds()) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the original's transaction never grew older than the TTL")
			}
			time.Sleep(20 * time.Millisecond)
		}
		h.open()
		orig := <-first
		retry := send()
		var broken []string
		if orig.Status != http.StatusCreated || replayed(orig) {
			broken = append(broken, fmt.Sprintf("original answered %d %s, want a fresh 201", orig.Status, orig.Body))
		}
		if retry.Status != http.StatusCreated || !replayed(retry) || !bytes.Equal(retry.Body, orig.Body) {
			broken = append(broken, fmt.Sprintf("retry right after the original answered: %d (replayed %v) %s, want the original's 201 replayed",
				retry.Status, replayed(retry), retry.Body))
		}
		if s := stockOf(e, id); s != 13 {
			broken = append(broken, fmt.Sprintf("stock %d, want 13: the adjustment applied more than once", s))
		}
		// The record's life, seen from the row: from its claim (created_at,
		// the transaction's start) to its expiry is the TTL plus the time
		// the request took.
		if life := e.QueryInt(`SELECT (extract(epoch FROM expires_at - created_at) * 1000)::bigint FROM idempotency_keys`); replayed(retry) &&
			life < (ttl+200*time.Millisecond).Milliseconds() {
			broken = append(broken, fmt.Sprintf("the record expires %d ms after its claim, want more than the TTL plus the request's time (%d ms)",
				life, (ttl+200*time.Millisecond).Milliseconds()))
		}
		return broken
	}
	t.Run("guarded", func(t *testing.T) {
		t.Parallel()
		for _, b := range run(t, false) {
			t.Error(b)
		}
	})
	t.Run("naive expiry from the claim is caught", func(t *testing.T) {
		t.Parallel()
		broken := run(t, true)
		if len(broken) == 0 {
			t.Fatal("the naive completion kept the contract: the test cannot tell claim time from completion time")
		}
		t.Logf("naive variant broke the contract as expected: %v", broken)
	})
}

// claimTimeExpiryKeys completes a record without touching its expiry, which
// therefore counts from the claim (now() + TTL, the transaction's start).
type claimTimeExpiryKeys struct {
	app.KeyStore
	db interface {
		Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	}
}

func (s claimTimeExpiryKeys) Complete(ctx context.Context, k app.Key, r app.Receipt) error {
	headers, err := json.Marshal(r.Header)
	if err != nil {
		return err
	}
	_, err = s.db.Exec(ctx, `UPDATE idempotency_keys
		SET state = 'completed', response_status = $4, response_headers = $5, response_body = $6
		WHERE actor_id = $1 AND operation = $2 AND key = $3`,
		k.ActorID, k.Operation, k.Value, r.Status, headers, r.Body)
	return err
}
