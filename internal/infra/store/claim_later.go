package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
)

// FAST PATH (docs/fast-path.md #13): the claim goes out with the locks.
//
// In a transaction, keyStore.Claim does not send the claim: it leaves it
// here (claimLater), for the transaction's next statement to carry. The
// placement's lock batch takes it over (placementRepo.LockForPlacement):
// BEGIN, the guards, the claim with its waits and the token check, the key's
// record and both locks then go out in one round trip. Any other statement,
// a write queued for COMMIT, or the end of the use case sends the claim
// first, on its own, as before (claimingConn): every other use case sends
// what it always sent. Whatever the claim finds comes back as the error of
// the statement that carried it, a completed duplicate as *app.PriorReceipt,
// which app's execute answers with the replay; the transaction rolls back,
// and with it the locks that a duplicate did not need.
type pendingClaim struct {
	ctx      context.Context
	key      app.Key
	deadline time.Time
}

// claimSlot holds the transaction's claim while it waits to go out.
type claimSlot struct{ claim *pendingClaim }

// take returns the waiting claim, if any, and empties the slot.
func (c *claimSlot) take() *pendingClaim {
	if c == nil {
		return nil
	}
	p := c.claim
	c.claim = nil
	return p
}

// claimLater leaves k's claim in the transaction's slot and says whether it
// did: not outside a transaction (no slot).
func (s keyStore) claimLater(ctx context.Context, k app.Key, deadline time.Time) bool {
	if s.claims == nil {
		return false
	}
	s.claims.claim = &pendingClaim{ctx: ctx, key: k, deadline: deadline}
	return true
}

// sendClaim sends the waiting claim, if any, on its own, and turns what it
// found into an error: nil when it took the key.
func (s *repositories) sendClaim() error {
	p := s.claims.take()
	if p == nil {
		return nil
	}
	r, err := keyStore{s}.claimNow(p.ctx, p.key, p.deadline)
	if err != nil {
		return err
	}
	if r != nil {
		return &app.PriorReceipt{Receipt: *r}
	}
	return nil
}

// carryClaim queues the waiting claim, if any, into b, for the statements
// that follow it in b to ride with it. The caller sends b without the
// token check in front (Conn.WithoutAuthCheck: the claim carries it) and
// then calls settle with b's error: settle turns what the claim found into
// the error to return, nil when it took the key.
func (s *repositories) carryClaim(b *postgres.Batch) (carried bool, settle func(sendErr error) error) {
	p := s.claims.take()
	if p == nil {
		return false, func(err error) error { return err }
	}
	ks := keyStore{s}
	out := ks.addClaim(p.ctx, b, p.key, p.deadline, ks.claimCall(p.ctx, p.key))
	return true, func(err error) error {
		if err != nil && !out.read {
			return claimErr(err) // the claim itself failed, or its wait ran out
		}
		if err != nil {
			return err
		}
		rec, err := out.record()
		if err == nil && rec == nil {
			return nil // the claim took the key
		}
		var r *app.Receipt
		if err == nil {
			r, err = ks.held(p.ctx, p.key, p.deadline, rec)
		}
		if errors.Is(err, errRecordPurged) {
			// The record that stopped the claim (or its reclaim) is gone:
			// claim again. The key's actor is the customer, whose row this
			// transaction has locked, so no other placement with the key
			// is between its claim and its locks.
			r, err = ks.claimNow(p.ctx, p.key, p.deadline)
		}
		return prior(r, err)
	}
}

// prior turns a claim's answer into an error: a completed duplicate's
// receipt as *app.PriorReceipt.
func prior(r *app.Receipt, err error) error {
	if err == nil && r != nil {
		return &app.PriorReceipt{Receipt: *r}
	}
	return err
}

// claimingConn is a transaction as its repositories see it: a claim left in
// the slot goes out on its own before any statement or batch that does not
// carry it, and before a write is queued for COMMIT.
type claimingConn struct {
	postgres.Conn
	repos *repositories
}

func (c claimingConn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := c.repos.sendClaim(); err != nil {
		return pgconn.CommandTag{}, err
	}
	return c.Conn.Exec(ctx, sql, args...)
}

func (c claimingConn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := c.repos.sendClaim(); err != nil {
		return nil, err
	}
	return c.Conn.Query(ctx, sql, args...)
}

func (c claimingConn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := c.repos.sendClaim(); err != nil {
		return errRow{err}
	}
	return c.Conn.QueryRow(ctx, sql, args...)
}

func (c claimingConn) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if err := c.repos.sendClaim(); err != nil {
		return errBatch{err}
	}
	return c.Conn.SendBatch(ctx, b)
}

func (c claimingConn) AtCommit(call func(db dbsqlc.DBTX) error) error {
	if err := c.repos.sendClaim(); err != nil {
		return err
	}
	return c.Conn.AtCommit(call)
}

// errRow is a row whose scan fails with err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// errBatch is a batch whose every result fails with err.
type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow(b) }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil }
