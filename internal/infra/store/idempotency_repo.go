package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
)

// KeyConfig sets the idempotency store's timing.
type KeyConfig struct {
	// TTL is how long a completed record is kept (IDEMPOTENCY_TTL).
	TTL time.Duration
	// Wait bounds how long a duplicate waits for the in-flight original
	// (IDEMPOTENCY_WAIT).
	Wait time.Duration
	// LockTimeout is the pool's lock_timeout, restored after the claim.
	LockTimeout time.Duration
	// Store, when set, replaces the idempotency_keys table as every
	// transaction's key store. Only cmd/api sets it, to a store that keeps
	// nothing, for the benchmark switch BENCH_DISABLE_IDEMPOTENCY.
	Store app.KeyStore
}

// keyStore implements app.KeyStore on the idempotency_keys table, inside the
// caller's transaction (EXT.IDEMPOTENCY.KEY.001, REPLAY.001).
//
// The claim is an INSERT … ON CONFLICT DO NOTHING of an 'in_progress' row. It
// is never visible to other sessions before the business change commits with
// it, turned 'completed'. A concurrent duplicate therefore blocks inside its
// own INSERT on the primary key until the original commits (its INSERT then
// does nothing, and it replays the committed record) or rolls back (its
// INSERT then succeeds, and it executes). The wait is bounded by setting
// lock_timeout to IDEMPOTENCY_WAIT for the claim alone; when it runs out the
// duplicate gets idempotency_in_progress.
//
// Patterns and rule ids: docs/patterns.md.
type keyStore struct{ *repositories }

// errRecordPurged: the expired record whose conflict stopped the claim's
// INSERT was deleted by the retention purge before the claim could read or
// reclaim it. The key is free, so the claim starts over.
var errRecordPurged = errors.New("idempotency record purged during the claim")

// claimTries bounds how often Claim starts over after errRecordPurged.
const claimTries = 3

func (s keyStore) Claim(ctx context.Context, k app.Key) (*app.Receipt, error) {
	if s.recent.seen(k) {
		if r, answered, err := s.replayAhead(ctx, k); answered || err != nil {
			return r, err
		}
	}
	// Every wait for the key (in this process, on the original's claim, on
	// its reclaim of an expired record) comes out of one budget of
	// IDEMPOTENCY_WAIT.
	deadline := keyDeadline(ctx, s.keys.Wait)
	if s.claimLater(ctx, k, deadline) {
		return nil, nil
	}
	return s.claimNow(ctx, k, deadline)
}

// claimNow claims k in its own round trip, and starts over (at most
// claimTries times) when the record that stopped the claim was purged
// before it could be read.
func (s keyStore) claimNow(ctx context.Context, k app.Key, deadline time.Time) (*app.Receipt, error) {
	for try := 1; ; try++ {
		r, err := s.claimOnce(ctx, k, deadline)
		if !errors.Is(err, errRecordPurged) {
			return r, err
		}
		if try == claimTries {
			return nil, &app.KeyInProgressError{RetryAfter: time.Second}
		}
	}
}

// waitLeft is what remains of the claim's wait budget, as a lock_timeout:
// at least a millisecond, since 0 would switch the timeout off.
func waitLeft(deadline time.Time) string {
	return postgres.Millis(max(time.Until(deadline), time.Millisecond))
}

func (s keyStore) claimOnce(ctx context.Context, k app.Key, deadline time.Time) (*app.Receipt, error) {
	rec, err := s.claimBatch(ctx, k, deadline, s.claimCall(ctx, k))
	if err != nil || rec == nil {
		return nil, err
	}
	return s.held(ctx, k, deadline, rec)
}

// claimCall is the claim's INSERT of k.
func (s keyStore) claimCall(ctx context.Context, k app.Key) func(db dbsqlc.DBTX) (int64, error) {
	p := dbsqlc.IdempotencyClaimParams{
		ActorID: k.ActorID, Operation: k.Operation, Key: k.Value, Fingerprint: k.Fingerprint[:], TtlSeconds: s.keys.TTL.Seconds(),
	}
	return func(db dbsqlc.DBTX) (int64, error) { return s.q.IdempotencyClaim(ctx, db, p) }
}

// held is the answer of a claim that found rec holding k: nil when rec had
// expired and is now this transaction's, else the receipt of the completed
// request, or the refusal (another request, or one still in flight).
func (s keyStore) held(ctx context.Context, k app.Key, deadline time.Time, rec *dbsqlc.IdempotencyGetRow) (*app.Receipt, error) {
	if rec.Expired {
		// Past its expiry the key is free again: take the row over. If a
		// concurrent duplicate took it first, this waits on the row's lock
		// for what is left of IDEMPOTENCY_WAIT, like the claim, and then
		// updates nothing, and the fresh record is read in the same batch.
		var err error
		if rec, err = s.reclaim(ctx, k, deadline); err != nil {
			return nil, err
		}
		if rec == nil {
			return nil, nil
		}
	}
	if !sameRequest(rec.Fingerprint, k) {
		return nil, app.ErrKeyReused
	}
	if !completed(rec) {
		return nil, &app.KeyInProgressError{RetryAfter: time.Second}
	}
	return receipt(rec)
}

// FAST PATH (docs/fast-path.md #12): a replay in one round trip.
//
// replayAhead reads k's record ahead of the transaction (postgres.Conn's
// Ahead: the guards, the token check and IdempotencyGet in one round trip,
// BEGIN not sent). It answers (answered true) when the record is completed
// and current: its receipt, or app.ErrKeyReused for another request. A
// record that is absent, expired or not yet visible (an in-flight original
// commits its claim with its completion) answers nothing, and the claim
// then takes the key or waits for the original as it would have.
func (s keyStore) replayAhead(ctx context.Context, k app.Key) (r *app.Receipt, answered bool, err error) {
	var rec *dbsqlc.IdempotencyGetRow
	ran, err := s.db.Ahead(ctx, func(db dbsqlc.DBTX) error {
		row, err := s.q.IdempotencyGet(ctx, db, dbsqlc.IdempotencyGetParams{ActorID: k.ActorID, Operation: k.Operation, Key: k.Value})
		if postgres.IsNoRows(err) {
			return nil
		}
		if err != nil {
			return err
		}
		rec = &row
		return nil
	})
	if err != nil {
		return nil, false, wrap("keys.claim", err)
	}
	if !ran || rec == nil || rec.Expired || !completed(rec) {
		return nil, false, nil
	}
	if !sameRequest(rec.Fingerprint, k) {
		return nil, true, app.ErrKeyReused
	}
	r, err = receipt(rec)
	return r, true, err
}

// completed says whether rec holds a finished request's receipt.
func completed(rec *dbsqlc.IdempotencyGetRow) bool {
	return rec.State == "completed" && rec.ResponseStatus.Valid
}

// receipt decodes the stored response of a completed record.
func receipt(rec *dbsqlc.IdempotencyGetRow) (*app.Receipt, error) {
	r := &app.Receipt{Status: int(rec.ResponseStatus.Int32), Body: rec.ResponseBody}
	if len(rec.ResponseHeaders) > 0 {
		if err := json.Unmarshal(rec.ResponseHeaders, &r.Header); err != nil {
			return nil, fmt.Errorf("decode stored headers: %w", err)
		}
	}
	return r, nil
}

// reclaim takes over the expired record that holds k, in one round trip
// like the claim's. It returns nil when the key is now this transaction's,
// or the record of the duplicate that took it over first.
func (s keyStore) reclaim(ctx context.Context, k app.Key, deadline time.Time) (*dbsqlc.IdempotencyGetRow, error) {
	return s.claimBatch(ctx, k, deadline, func(db dbsqlc.DBTX) (int64, error) {
		return s.q.IdempotencyReclaimExpired(ctx, db, dbsqlc.IdempotencyReclaimExpiredParams{
			Fingerprint: k.Fingerprint[:], TtlSeconds: s.keys.TTL.Seconds(), ActorID: k.ActorID, Operation: k.Operation, Key: k.Value,
		})
	})
}

// FAST PATH (docs/fast-path.md #3, #6): the claim, its waits and the token
// check in one round trip.
//
// claimBatch sends a claim (or a reclaim) in one round trip (addClaim). It
// returns nil when the claim took the key, else the record that holds it;
// errRecordPurged when there is none.
func (s keyStore) claimBatch(ctx context.Context, k app.Key, deadline time.Time, claim func(dbsqlc.DBTX) (int64, error)) (*dbsqlc.IdempotencyGetRow, error) {
	var b postgres.Batch
	out := s.addClaim(ctx, &b, k, deadline, claim)
	if err := b.Send(ctx, s.db.WithoutAuthCheck()); err != nil {
		return nil, claimErr(err)
	}
	return out.record()
}

// addClaim queues a claim into b: bound the wait, claim, restore the lock
// timeout, and read the record that holds the key (our own when the claim
// took it). The server runs them in this order and stops at the first
// error. The request's token check goes after the claim, which may have
// waited: whether the caller may act is read once the wait is over, and a
// refused check is the error. So b must be sent without the check in front
// (Conn.WithoutAuthCheck). What the claim found is read from the outcome
// once b is sent.
func (s keyStore) addClaim(ctx context.Context, b *postgres.Batch, k app.Key, deadline time.Time, claim func(dbsqlc.DBTX) (int64, error)) *claimOutcome {
	out := &claimOutcome{}
	wait, restore := waitLeft(deadline), postgres.Millis(s.keys.LockTimeout)
	b.Add(func(db dbsqlc.DBTX) error { return postgres.OwnSetting(s.q.IdempotencySetLockTimeout(ctx, db, wait)) })
	b.Add(func(db dbsqlc.DBTX) (err error) {
		out.claimed, err = claim(db)
		return err
	})
	b.Add(func(db dbsqlc.DBTX) error {
		return postgres.OwnSetting(s.q.IdempotencySetLockTimeout(ctx, db, restore))
	})
	b.AddAuthCheck(ctx, s.db.AuthCheck())
	b.Add(func(db dbsqlc.DBTX) error {
		row, err := s.q.IdempotencyGet(ctx, db, dbsqlc.IdempotencyGetParams{ActorID: k.ActorID, Operation: k.Operation, Key: k.Value})
		if err != nil && !postgres.IsNoRows(err) {
			return err
		}
		if err == nil {
			out.rec = &row
		}
		out.read = true
		return nil
	})
	return out
}

// claimOutcome is what a claim sent in a batch found.
type claimOutcome struct {
	claimed int64
	rec     *dbsqlc.IdempotencyGetRow
	// read is set once every statement of the claim ran: a batch that
	// failed before is a failure of the claim (claimErr).
	read bool
}

// record is nil when the claim took the key, else the record that holds
// it; errRecordPurged when there is none.
func (o *claimOutcome) record() (*dbsqlc.IdempotencyGetRow, error) {
	if o.claimed == 1 {
		return nil, nil
	}
	if o.rec == nil {
		return nil, errRecordPurged
	}
	return o.rec, nil
}

// claimErr maps a claim's failure: a wait that ran out (lock_timeout, or a
// cancel) means the holder is still in flight.
func claimErr(err error) error {
	if postgres.LockWaitEnded(err) {
		return &app.KeyInProgressError{RetryAfter: time.Second}
	}
	return wrap("keys.claim", err)
}

// Complete stores the receipt on the claimed key. In a transaction the
// UPDATE is sent together with COMMIT, in the same round trip; if it fails,
// the commit fails and nothing of the request is kept.
func (s keyStore) Complete(ctx context.Context, k app.Key, r app.Receipt) error {
	headers, err := json.Marshal(r.Header)
	if err != nil {
		return err
	}
	p := dbsqlc.IdempotencyCompleteParams{
		ActorID: k.ActorID, Operation: k.Operation, Key: k.Value,
		ResponseStatus:  pgtype.Int4{Int32: int32(r.Status), Valid: true},
		ResponseHeaders: headers,
		ResponseBody:    r.Body,
		TtlSeconds:      s.keys.TTL.Seconds(),
	}
	return wrap("keys.complete", s.db.AtCommit(func(db dbsqlc.DBTX) error { return s.q.IdempotencyComplete(ctx, db, p) }))
}

// sameRequest says whether a stored fingerprint is k's request: under its
// operation's current canonical form, or under the previous one while it is
// still accepted (a record written before the form changed).
func sameRequest(stored []byte, k app.Key) bool {
	return bytes.Equal(stored, k.Fingerprint[:]) || (k.Previous != [32]byte{} && bytes.Equal(stored, k.Previous[:]))
}
