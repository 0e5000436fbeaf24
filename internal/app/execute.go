package app

import "context"

// Call carries what every write command needs besides its input: who calls,
// the idempotency key (nil when none was sent) and how to render the result.
type Call[T any] struct {
	Principal Principal
	Key       *Key
	Render    func(T) (Receipt, error)
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
// With a key, and a Transactor that can (KeyLatch), the request first waits
// for any other request of this process with the same key, without holding a
// connection.
func execute[T any](ctx context.Context, t Transactor, iso Isolation, call Call[T], fn func(ctx context.Context, repos Repositories) (T, error)) (Outcome, error) {
	var out Outcome
	if l, ok := t.(KeyLatch); ok && call.Key != nil {
		lctx, release, err := l.LatchKey(ctx, *call.Key)
		if err != nil {
			return out, err
		}
		defer release()
		ctx = lctx
	}
	err := t.InTx(ctx, iso, func(ctx context.Context, repos Repositories) error {
		out = Outcome{}
		if call.Key != nil {
			prior, err := repos.Keys().Claim(ctx, *call.Key)
			if err != nil {
				return err
			}
			if prior != nil {
				out = Outcome{Receipt: *prior, Replayed: true}
				return nil
			}
		}
		v, err := fn(ctx, repos)
		if err != nil {
			return err
		}
		rcpt, err := call.Render(v)
		if err != nil {
			return err
		}
		if call.Key != nil {
			if err := repos.Keys().Complete(ctx, *call.Key, rcpt); err != nil {
				return err
			}
		}
		out.Receipt = rcpt
		return nil
	})
	return out, err
}
