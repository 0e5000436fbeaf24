package app

import (
	"context"
	"errors"
)

// Call carries what every write command needs besides its input: who calls,
// the request's token check (nil for a caller that was not authenticated,
// such as a test or a tool), the idempotency key (nil when none was sent)
// and how to render the result.
type Call[T any] struct {
	Principal Principal
	// Auth is the request's token check (Authenticate.Handle): the
	// transaction's connection sends it in front of its first statement.
	Auth   *AuthCheck
	Key    *Key
	Render func(T) (Receipt, error)
}

// Outcome is the response of a write command, fresh or replayed.
type Outcome struct {
	Receipt  Receipt
	Replayed bool
}

// execute runs fn in one transaction together with the idempotency record of
// call.Key, when there is one: the claim, the business change and the stored
// receipt commit together or not at all (EXT.IDEMPOTENCY.REPLAY.001). A
// completed duplicate returns its receipt without running fn. An error from fn
// rolls everything back, so rejections store nothing and a retry re-executes.
//
// With a key and a latch (the command's Latch, from Deps.Latch), the request
// first waits for any other request of this process with the same key,
// without holding a connection.
//
// Patterns and rule ids: docs/patterns.md.
func execute[T any](ctx context.Context, t Transactor, latch KeyLatch, iso Isolation, call Call[T], fn func(ctx context.Context, repos Repositories) (T, error)) (Outcome, error) {
	ctx, release, err := latchKey(ctx, latch, call.Auth, call.Key)
	if err != nil {
		return Outcome{}, err
	}
	defer release()
	var out Outcome
	err = t.InTx(ctx, call.Auth, iso, func(ctx context.Context, repos Repositories) (err error) {
		out, err = attempt(ctx, repos, call, fn)
		return err
	})
	// A claim sent with a later statement found a completed duplicate
	// (KeyStore.Claim): the transaction rolled back, the answer is the
	// replay.
	var prior *PriorReceipt
	if errors.As(err, &prior) {
		return Outcome{Receipt: prior.Receipt, Replayed: true}, nil
	}
	return out, err
}

// RefuseUnderKey answers a keyed request that its transport refuses before
// any use case runs (an If-Match that is missing or unreadable) in the
// contract's order, which checks the key first: a completed request under k
// replays if it is this one and is idempotency_key_reused if it is another,
// a duplicate in flight is waited for (idempotency_in_progress past the
// wait), and only a key that holds nothing gets refusal. The claim and the
// refusal share one transaction, which the refusal rolls back: nothing is
// stored, so a retry that mends the request runs. A request without a key
// needs none of this and is refused at once.
func (u UseCases) RefuseUnderKey(ctx context.Context, p Principal, auth *AuthCheck, k Key, refusal error) (Outcome, error) {
	if refusal == nil {
		return Outcome{}, errors.New("RefuseUnderKey without a refusal")
	}
	call := Call[struct{}]{Principal: p, Auth: auth, Key: &k}
	return execute(ctx, u.deps.Transactor, u.deps.Latch, ReadCommitted, call, func(context.Context, Repositories) (struct{}, error) {
		return struct{}{}, refusal
	})
}

// latchKey takes k in latch when there are both (auth is read again after
// a wait, KeyLatch), and returns the context to
// run the request with and the release.
func latchKey(ctx context.Context, latch KeyLatch, auth *AuthCheck, k *Key) (context.Context, func(), error) {
	if latch == nil || k == nil {
		return ctx, func() {}, nil
	}
	return latch.LatchKey(ctx, auth, *k)
}

// attempt is one run of the transaction's function: claim the key (a
// completed duplicate replays), run fn, render its result and store the
// receipt on the key.
func attempt[T any](ctx context.Context, repos Repositories, call Call[T], fn func(ctx context.Context, repos Repositories) (T, error)) (Outcome, error) {
	if call.Key != nil {
		prior, err := repos.Keys().Claim(ctx, *call.Key)
		if err != nil {
			return Outcome{}, err
		}
		if prior != nil {
			return Outcome{Receipt: *prior, Replayed: true}, nil
		}
	}
	v, err := fn(ctx, repos)
	if err != nil {
		return Outcome{}, err
	}
	rcpt, err := call.Render(v)
	if err != nil {
		return Outcome{}, err
	}
	if call.Key != nil {
		if err := repos.Keys().Complete(ctx, *call.Key, rcpt); err != nil {
			return Outcome{}, err
		}
	}
	return Outcome{Receipt: rcpt}, nil
}
