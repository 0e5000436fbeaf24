package store

import (
	"fmt"
	"testing"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
)

// recentKeys remembers a key from its first sighting on, tells keys apart
// by actor, operation and value, and forgets the oldest generation when the
// current one fills up: it never holds more than two generations.
func TestRecentKeysRemembersWhatWasClaimedLately(t *testing.T) {
	t.Parallel()
	r := newRecentKeys()
	actor := uuid.New()
	k := app.Key{ActorID: actor, Operation: "place_order", Value: "k1"}
	if r.seen(k) {
		t.Fatal("a key never claimed was seen")
	}
	if !r.seen(k) {
		t.Fatal("a key claimed once was not seen")
	}
	for _, other := range []app.Key{
		{ActorID: uuid.New(), Operation: k.Operation, Value: k.Value},
		{ActorID: actor, Operation: "cancel_order", Value: k.Value},
		{ActorID: actor, Operation: k.Operation, Value: "k2"},
	} {
		if r.seen(other) {
			t.Errorf("%+v taken for %+v", other, k)
		}
	}
	// Fill two generations: k is then forgotten, the newest keys are not.
	var last app.Key
	for i := range 2 * recentKeysPerGeneration {
		last = app.Key{ActorID: actor, Operation: k.Operation, Value: fmt.Sprint("fill-", i)}
		r.seen(last)
	}
	if r.seen(k) {
		t.Error("a key two generations old is still remembered")
	}
	if !r.seen(last) {
		t.Error("the newest key was forgotten")
	}
	if n := len(r.cur) + len(r.prev); n > 2*recentKeysPerGeneration {
		t.Errorf("%d keys held, at most %d", n, 2*recentKeysPerGeneration)
	}
	var none *recentKeys
	if none.seen(k) {
		t.Error("no memory saw a key")
	}
}
