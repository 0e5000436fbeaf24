package app

import (
	"context"
	"crypto/sha256"
	"sync"
	"sync/atomic"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// Authenticate resolves a bearer token to its actor.
//
// Invariant: a deactivated actor's tokens stop working at once, on every
// replica: a request that starts after the deactivation committed is refused
// with 401, whatever it asks for. Mechanism: every request reads its token's
// row and its actor's active flag from the database; no process ever decides
// that alone. What a process may remember (TokenCache) is only which actor
// and role a token hash belongs to, facts that never change. When it knows
// them, the read is not a round trip of its own: it goes out in front of the
// request's first statement, in the same round trip (AuthCheck), and the
// request fails unless it passes. The check is a value the caller passes
// on: in Call.Auth to a command, as an argument to a query, and from there
// to the connection the repositories are bound to (Transactor.InTx,
// Transactor.WithoutTx, Reader.Read), which sends it; it never rides in a
// context. A request that would answer without any statement confirms
// first (Confirm). See docs/adr/0005.
//
// A request that waits (on an idempotency key, in this process or in the
// database, or before retrying its transaction) reads it again after the
// wait, before it acts or answers (AuthCheck.Recheck): a deactivation that
// commits while a request waits refuses it too. See docs/adr/0011.
//
// Codes: unauthenticated.
type Authenticate struct {
	Transactor Transactor
	// Cache, when set, spares the separate lookup round trip for tokens
	// this process has seen; nil looks every token up on its own.
	Cache *TokenCache
}

// HashToken is how a token is stored and looked up: only its SHA-256 is kept.
func HashToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// ErrUnauthenticated: the token is unknown or its actor is deactivated.
var ErrUnauthenticated = domain.Errorf(domain.CodeUnauthenticated, "a valid bearer token is required")

// Handle looks the token up by its hash. It returns the caller and the
// request's check, to pass to every use case the request runs: pending
// when the actor came from the cache, passed when the lookup was a round
// trip of its own.
func (h Authenticate) Handle(ctx context.Context, token string) (Principal, *AuthCheck, error) {
	hash := HashToken(token)
	if p, ok := h.Cache.get(hash); ok {
		return p, &AuthCheck{hash: hash, want: p, cache: h.Cache}, nil
	}
	p, err := h.lookup(ctx, hash)
	if err != nil {
		return Principal{}, nil, err
	}
	h.Cache.put(hash, p)
	// The lookup settled this request's check; it is still returned so
	// that a wait or a retry can ask for it again (AuthCheck.Recheck).
	c := &AuthCheck{hash: hash, want: p, cache: h.Cache}
	c.state.Store(checkPassed)
	return p, c, nil
}

func (h Authenticate) lookup(ctx context.Context, hash []byte) (Principal, error) {
	p, err := h.Transactor.WithoutTx(nil).Actors().ByTokenHash(ctx, hash)
	if err != nil {
		if domain.ErrorCode(err) == domain.CodeNotFound {
			return Principal{}, ErrUnauthenticated
		}
		return Principal{}, err
	}
	if !p.Active {
		return Principal{}, ErrUnauthenticated
	}
	return p, nil
}

// Confirm settles the request's check c, when pending, with a lookup of its
// own: for a request about to answer without having sent a statement (a
// validation error, say). It returns ErrUnauthenticated when the check
// fails, another error when the database could not tell, nil otherwise
// (nil too for a nil c: a request that was not authenticated).
func (h Authenticate) Confirm(ctx context.Context, c *AuthCheck) error {
	if !c.Pending() {
		if c != nil && c.Refused() {
			return ErrUnauthenticated
		}
		return nil
	}
	// The lookup's connection carries no check: it is the check.
	p, err := h.Transactor.WithoutTx(nil).Actors().ByTokenHash(ctx, c.hash)
	switch {
	case domain.ErrorCode(err) == domain.CodeNotFound:
		return c.Settle(Principal{}, false)
	case err != nil:
		return err
	}
	return c.Settle(p, true)
}

// FAST PATH (docs/fast-path.md #6): the token check in band.
//
// AuthCheck is a request's token check that has yet to reach the database:
// the actor came from the cache, and the token's row and the actor's active
// flag must be read by the request's first round trip. The repositories'
// implementation (internal/infra) sends the token lookup in front of the
// first statement and settles the check with what it read; a refused check
// fails that statement, so nothing the request asked for is answered. It
// is passed explicitly: the connection the repositories are bound to
// carries it (Transactor.InTx, Transactor.WithoutTx, Reader.Read).
type AuthCheck struct {
	hash  []byte
	want  Principal
	cache *TokenCache
	state atomic.Int32
}

const (
	checkPending int32 = iota
	checkPassed
	checkRefused
)

// Pending says whether the check has yet to reach the database: its next
// round trip must carry it (false for a nil check).
func (c *AuthCheck) Pending() bool { return c != nil && c.state.Load() == checkPending }

// TokenHash is the hash to look up.
func (c *AuthCheck) TokenHash() []byte { return c.hash }

// Settle records the database's answer: the token's actor when the token
// was found. The check passes only for the same actor and role, active.
func (c *AuthCheck) Settle(p Principal, found bool) error {
	if found && p.Active && p.ID == c.want.ID && p.Role == c.want.Role {
		c.state.CompareAndSwap(checkPending, checkPassed)
		return nil
	}
	c.state.Store(checkRefused)
	c.cache.forget(c.hash)
	return ErrUnauthenticated
}

// Recheck makes a passed check pending again: the request has waited (on an
// idempotency key, or before retrying its transaction), and whether its
// actor may act is read again by its next round trip, or confirmed before it
// answers without one. A refused check stays refused. See docs/adr/0011.
func (c *AuthCheck) Recheck() {
	if c != nil {
		c.state.CompareAndSwap(checkPassed, checkPending)
	}
}

// Refused says whether the check failed.
func (c *AuthCheck) Refused() bool { return c.state.Load() == checkRefused }

// FAST PATH (docs/fast-path.md #6): the token cache.
//
// TokenCache remembers which actor and role a token hash belongs to. Both
// never change: a token is made for one actor, and no operation changes a
// role. It never remembers whether the token still exists or its actor is
// active; every request reads those (see Authenticate). Bounded: when full,
// it starts over.
type TokenCache struct {
	mu  sync.RWMutex
	m   map[[32]byte]Principal
	max int
}

// NewTokenCache returns a cache of at most max tokens.
func NewTokenCache(max int) *TokenCache {
	return &TokenCache{m: make(map[[32]byte]Principal), max: max}
}

func (c *TokenCache) get(hash []byte) (Principal, bool) {
	if c == nil || len(hash) != 32 {
		return Principal{}, false
	}
	c.mu.RLock()
	p, ok := c.m[[32]byte(hash)]
	c.mu.RUnlock()
	return p, ok
}

func (c *TokenCache) put(hash []byte, p Principal) {
	if c == nil || len(hash) != 32 {
		return
	}
	c.mu.Lock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[[32]byte(hash)] = Principal{ID: p.ID, Role: p.Role, Active: true}
	c.mu.Unlock()
}

func (c *TokenCache) forget(hash []byte) {
	if c == nil || len(hash) != 32 {
		return
	}
	c.mu.Lock()
	delete(c.m, [32]byte(hash))
	c.mu.Unlock()
}
