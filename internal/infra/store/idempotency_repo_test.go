package store_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/ordersvc/ordersvc/internal/app"
)

// The key store claims a key in the caller's transaction, completes it with
// the receipt at COMMIT, and then answers a claim of the same key with that
// receipt; another fingerprint on the same key is refused
// (EXT.IDEMPOTENCY.KEY.001, EXT.IDEMPOTENCY.REPLAY.001).
//
// Patterns and rule ids: docs/patterns.md.
func TestKeyClaimCompleteReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	k := app.Key{ActorID: customerID, Operation: "placeOrder", Value: "k1", Fingerprint: [32]byte{1}}
	receipt := app.Receipt{Status: 201, Header: map[string]string{"Location": "/v1/orders/1"}, Body: []byte(`{"id":"1"}`)}
	b.inTx(func(ctx context.Context, repos app.Repositories) error {
		prior, err := repos.Keys().Claim(ctx, k)
		if err != nil || prior != nil {
			t.Fatalf("first claim: %v, %v", prior, err)
		}
		return repos.Keys().Complete(ctx, k, receipt)
	})
	b.inTx(func(ctx context.Context, repos app.Repositories) error {
		prior, err := repos.Keys().Claim(ctx, k)
		if err != nil || prior == nil || !reflect.DeepEqual(*prior, receipt) {
			t.Errorf("replay: %+v, %v, want %+v", prior, err, receipt)
		}
		return nil
	})
	reused := k
	reused.Fingerprint = [32]byte{2}
	err := b.runner.InTx(b.ctx, nil, app.ReadCommitted, func(ctx context.Context, repos app.Repositories) error {
		_, err := repos.Keys().Claim(ctx, reused)
		return err
	})
	if !errors.Is(err, app.ErrKeyReused) {
		t.Fatalf("another fingerprint: %v, want the key refused", err)
	}
	if n := b.queryInt(`SELECT count(*) FROM idempotency_keys WHERE state = 'completed'`); n != 1 {
		t.Errorf("%d records, want 1", n)
	}
}

// Outside a transaction Complete runs at once (there is no COMMIT to ride
// with), on a claim another transaction committed.
func TestKeyCompleteOutsideATransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	k := app.Key{ActorID: customerID, Operation: "placeOrder", Value: "k2", Fingerprint: [32]byte{3}}
	b.inTx(func(ctx context.Context, repos app.Repositories) error {
		_, err := repos.Keys().Claim(ctx, k)
		return err
	})
	if err := b.repos.Keys().Complete(b.ctx, k, app.Receipt{Status: 200, Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if n := b.queryInt(`SELECT count(*) FROM idempotency_keys WHERE state = 'completed' AND response_status = 200`); n != 1 {
		t.Errorf("%d completed records, want 1", n)
	}
}
