package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// The runner sends BEGIN with a transaction's first statement and the
// deferred idempotency write with COMMIT. These tests pin down that the
// server still sees one ordinary transaction: same isolation, all or
// nothing, every failure fatal.

func TestTxIsOneTransactionFromFirstStatementToCommit(t *testing.T) {
	t.Parallel()
	e := testkit.New(t)
	ctx := context.Background()
	for _, iso := range []struct {
		level app.Isolation
		name  string
	}{{app.ReadCommitted, "read committed"}, {app.Serializable, "serializable"}} {
		err := e.Runner.InTx(ctx, nil, iso.level, func(ctx context.Context, tx app.Repositories) error {
			db := testkit.Conn(tx)
			var first, second int64
			var level string
			if err := db.QueryRow(ctx, `SELECT txid_current()`).Scan(&first); err != nil {
				return err
			}
			rows, err := db.Query(ctx, `SELECT txid_current() FROM generate_series(1, 3)`)
			if err != nil {
				return err
			}
			n := 0
			for rows.Next() {
				if err := rows.Scan(&second); err != nil {
					return err
				}
				n++
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			if err := db.QueryRow(ctx, `SELECT current_setting('transaction_isolation')`).Scan(&level); err != nil {
				return err
			}
			if n != 3 || first != second || level != iso.name {
				t.Errorf("%s: %d rows, txids %d and %d, isolation %q", iso.name, n, first, second, level)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", iso.name, err)
		}
	}
}

func TestTxFirstStatementAsQueryOpensTheTransaction(t *testing.T) {
	t.Parallel()
	e := testkit.New(t)
	ctx := context.Background()
	e.Exec(`CREATE TABLE t (v int)`)
	err := e.Runner.InTx(ctx, nil, app.ReadCommitted, func(ctx context.Context, tx app.Repositories) error {
		db := testkit.Conn(tx)
		rows, err := db.Query(ctx, `INSERT INTO t SELECT generate_series(1, 3) RETURNING v`)
		if err != nil {
			return err
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		return errors.New("abort")
	})
	if err == nil || err.Error() != "abort" {
		t.Fatalf("InTx: %v", err)
	}
	if n := e.QueryInt(`SELECT count(*) FROM t`); n != 0 {
		t.Fatalf("a rolled-back transaction left %d rows", n)
	}
}

func TestTxIgnoredFailureFailsTheCommit(t *testing.T) {
	t.Parallel()
	e := testkit.New(t)
	ctx := context.Background()
	e.Exec(`CREATE TABLE t (v int)`)
	err := e.Runner.InTx(ctx, nil, app.ReadCommitted, func(ctx context.Context, tx app.Repositories) error {
		db := testkit.Conn(tx)
		if _, err := db.Exec(ctx, `INSERT INTO t VALUES (1)`); err != nil {
			return err
		}
		_, _ = db.Exec(ctx, `SELECT 1/0`) // failure ignored by careless code
		return nil
	})
	if err == nil {
		t.Fatal("commit of an aborted transaction succeeded")
	}
	if n := e.QueryInt(`SELECT count(*) FROM t`); n != 0 {
		t.Fatalf("an aborted transaction left %d rows", n)
	}
	// The connection went back to the pool clean.
	for range 5 {
		if err := e.Runner.InTx(ctx, nil, app.ReadCommitted, func(ctx context.Context, tx app.Repositories) error {
			_, err := testkit.Conn(tx).Exec(ctx, `INSERT INTO t VALUES (2)`)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.QueryInt(`SELECT count(*) FROM t`); n != 5 {
		t.Fatalf("%d rows, want 5", n)
	}
}

func TestTxFirstStatementFailure(t *testing.T) {
	t.Parallel()
	e := testkit.New(t)
	ctx := context.Background()
	for range 3 {
		err := e.Runner.InTx(ctx, nil, app.ReadCommitted, func(ctx context.Context, tx app.Repositories) error {
			var v int
			return testkit.Conn(tx).QueryRow(ctx, `SELECT 1/0`).Scan(&v)
		})
		if err == nil {
			t.Fatal("division by zero succeeded")
		}
	}
	var v int
	if err := e.Runner.InTx(ctx, nil, app.ReadCommitted, func(ctx context.Context, tx app.Repositories) error {
		return testkit.Conn(tx).QueryRow(ctx, `SELECT 7`).Scan(&v)
	}); err != nil || v != 7 {
		t.Fatalf("after failures: %d, %v", v, err)
	}
}

// The idempotency record's completion travels with COMMIT: if it fails,
// the whole request fails and neither the claim nor the change is kept.
func TestKeyCompletionFailureFailsTheTransaction(t *testing.T) {
	t.Parallel()
	e := testkit.New(t)
	ctx := context.Background()
	e.Exec(`CREATE TABLE t (v int)`)
	k := app.Key{ActorID: uuid.MustParse(e.Staff.ID), Operation: "test", Value: "k1"}
	err := e.Runner.InTx(ctx, nil, app.ReadCommitted, func(ctx context.Context, tx app.Repositories) error {
		if prior, err := tx.Keys().Claim(ctx, k); err != nil || prior != nil {
			t.Fatalf("claim: %v %v", prior, err)
		}
		if _, err := testkit.Conn(tx).Exec(ctx, `INSERT INTO t VALUES (1)`); err != nil {
			return err
		}
		// 500 breaks the CHECK on response_status (2xx only).
		return tx.Keys().Complete(ctx, k, app.Receipt{Status: 500, Body: []byte(`{}`)})
	})
	if err == nil {
		t.Fatal("a completion that breaks a constraint committed")
	}
	if n := e.QueryInt(`SELECT count(*) FROM t`) + e.QueryInt(`SELECT count(*) FROM idempotency_keys`); n != 0 {
		t.Fatalf("the failed transaction left %d rows", n)
	}
}

// An event appended in a transaction travels with COMMIT: it exists if and
// only if the transaction committed, and a failure after it rolls it back.
func TestOutboxAppendCommitsWithTheTransaction(t *testing.T) {
	t.Parallel()
	e := testkit.New(t)
	ctx := context.Background()
	ev := app.Event{Type: app.EventStockAdjusted, AggregateID: uuid.New(), Data: map[string]int{"delta": 1}}
	err := e.Runner.InTx(ctx, nil, app.ReadCommitted, func(ctx context.Context, tx app.Repositories) error {
		if err := tx.Outbox().Append(ctx, ev); err != nil {
			return err
		}
		return errors.New("abort after the append")
	})
	if err == nil {
		t.Fatal("InTx succeeded")
	}
	if n := e.QueryInt(`SELECT count(*) FROM outbox_events`); n != 0 {
		t.Fatalf("a rolled-back transaction left %d events", n)
	}
	if err := e.Runner.InTx(ctx, nil, app.ReadCommitted, func(ctx context.Context, tx app.Repositories) error {
		return tx.Outbox().Append(ctx, ev)
	}); err != nil {
		t.Fatal(err)
	}
	if n := e.QueryInt(`SELECT count(*) FROM outbox_events WHERE aggregate_id = $1`, ev.AggregateID); n != 1 {
		t.Fatalf("%d events after a commit, want 1", n)
	}
}

// TestCommitSettlesAPendingTokenCheck: a transaction that sent nothing
// still answers only on the database's word about the caller's token. Its
// commit carries the pending check (ADR 0005) and fails when the check is
// refused; the naive commit, which had nothing to send and answered success
// at once, lets a deactivated actor's request succeed on the cache's word.
func TestCommitSettlesAPendingTokenCheck(t *testing.T) {
	t.Parallel()
	e := testkit.New(t)
	ctx := context.Background()
	customer := e.NewCustomer(0)
	auth := e.App.Authenticate
	pending := func() *app.AuthCheck {
		_, check, err := auth.Handle(ctx, customer.Token) // the cache learns the token on the first call
		if err != nil {
			t.Fatalf("authenticate: %v", err)
		}
		check.Recheck() // as after a wait: the next round trip reads the token again
		if !check.Pending() {
			t.Fatal("the check is not pending")
		}
		return check
	}
	if err := postgres.CommitUnsent(ctx, e.Pool, pending(), false); err != nil {
		t.Fatalf("active actor: commit with a pending check: %v", err)
	}
	e.Exec(`UPDATE actors SET active = false WHERE id = $1`, customer.ID)
	for _, naive := range []bool{true, false} { // naive first: a refused check makes the cache forget the token
		check := pending()
		err := postgres.CommitUnsent(ctx, e.Pool, check, naive)
		refused := errors.Is(err, app.ErrUnauthenticated) && check.Refused()
		switch {
		case !naive && !refused:
			t.Errorf("deactivated actor: commit answered %v, want the refused check's unauthenticated", err)
		case naive && refused:
			t.Errorf("naive commit refused too (%v): the test cannot tell the two apart", err)
		case naive:
			t.Logf("naive commit: %v, check still pending: %v", err, check.Pending())
		}
	}
}

// A statement run ahead of a transaction (Conn.Ahead) runs on its own, in
// its own implicit transaction, before BEGIN; the transaction that follows
// is whole; once it has begun, or outside a transaction, Ahead runs nothing.
func TestAheadRunsBeforeTheTransaction(t *testing.T) {
	t.Parallel()
	e := testkit.New(t)
	ctx := context.Background()
	e.Exec(`CREATE TABLE t (v int)`)
	txid := func(db dbsqlc.DBTX, v *int64) error { return db.QueryRow(ctx, `SELECT txid_current()`).Scan(v) }
	err := e.Runner.InTx(ctx, nil, app.ReadCommitted, func(ctx context.Context, tx app.Repositories) error {
		db := testkit.Conn(tx).(postgres.Conn)
		var ahead, again, inTx int64
		if ran, err := db.Ahead(ctx, func(db dbsqlc.DBTX) error { return txid(db, &ahead) }); !ran || err != nil {
			t.Fatalf("ahead of an unbegun transaction: ran %v, %v", ran, err)
		}
		if ran, err := db.Ahead(ctx, func(db dbsqlc.DBTX) error { return txid(db, &again) }); !ran || err != nil || again == ahead {
			t.Fatalf("second read ahead: ran %v, %v, txid %d then %d: not a transaction of its own", ran, err, ahead, again)
		}
		if _, err := db.Exec(ctx, `INSERT INTO t VALUES (1)`); err != nil {
			return err
		}
		if err := txid(db, &inTx); err != nil {
			return err
		}
		if inTx == again {
			t.Errorf("the transaction took the read's txid %d", inTx)
		}
		if ran, _ := db.Ahead(ctx, func(db dbsqlc.DBTX) error { return txid(db, &ahead) }); ran {
			t.Error("Ahead ran inside a begun transaction")
		}
		return errors.New("abort")
	})
	if err == nil || err.Error() != "abort" {
		t.Fatalf("InTx: %v", err)
	}
	if n := e.QueryInt(`SELECT count(*) FROM t`); n != 0 {
		t.Errorf("the aborted transaction kept %d rows", n)
	}
	if ran, _ := testkit.Conn(e.Runner.WithoutTx(nil)).(postgres.Conn).Ahead(ctx, func(db dbsqlc.DBTX) error { return txid(db, new(int64)) }); ran {
		t.Error("Ahead ran outside a transaction")
	}
}
