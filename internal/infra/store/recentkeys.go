package store

import (
	"sync"

	"github.com/ordersvc/ordersvc/internal/app"
)

// FAST PATH (docs/fast-path.md #12): which keys to read ahead.
//
// recentKeys remembers the idempotency keys that this process claimed
// lately: a request that carries one again is most likely a replay, and its
// record is read ahead of the transaction (keyStore.Claim). It is a hint,
// never an answer: the record in the database decides, and a key that is not
// remembered (first seen, claimed on another replica, before a restart, or
// forgotten) goes straight to the claim, which replays just as well. It
// holds at most 2×recentKeysPerGeneration keys: when the current generation
// is full, it becomes the previous one and the one before is dropped.
type recentKeys struct {
	mu        sync.Mutex
	cur, prev map[latchKey]struct{}
}

const recentKeysPerGeneration = 1 << 14

func newRecentKeys() *recentKeys {
	return &recentKeys{cur: make(map[latchKey]struct{})}
}

// seen says whether k was claimed lately, and remembers it.
func (r *recentKeys) seen(k app.Key) bool {
	if r == nil {
		return false
	}
	id := latchKey{actor: k.ActorID, operation: k.Operation, key: k.Value}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.cur[id]; ok {
		return true
	}
	_, ok := r.prev[id]
	if len(r.cur) == recentKeysPerGeneration {
		r.prev, r.cur = r.cur, make(map[latchKey]struct{}, recentKeysPerGeneration)
	}
	r.cur[id] = struct{}{}
	return ok
}
