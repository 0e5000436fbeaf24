package postgres_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// A batch runs generated calls in one round trip, and each call reads its
// own result with its generated scan: the same values as the call alone.
func TestBatchReadsEachResultThroughItsGeneratedCall(t *testing.T) {
	t.Parallel()
	e := testkit.New(t)
	ctx := context.Background()
	q := dbsqlc.New()
	id := uuid.New()
	var inserted, got dbsqlc.Actor
	var credit dbsqlc.ActorLockForOrderRow
	var staff int64
	stop := e.Hooks.Record()
	err := postgres.SendBatch(ctx, e.Pool,
		func(db dbsqlc.DBTX) (err error) {
			inserted, err = q.ActorInsert(ctx, db, dbsqlc.ActorInsertParams{ID: id, Name: "Batch", Role: "customer", CreditLimitCents: 700})
			return err
		},
		func(db dbsqlc.DBTX) (err error) {
			got, err = q.ActorGet(ctx, db, id)
			return err
		},
		func(db dbsqlc.DBTX) (err error) {
			credit, err = q.ActorLockForOrder(ctx, db, id)
			return err
		},
		func(db dbsqlc.DBTX) (err error) {
			staff, err = q.ActorCountOtherActiveStaff(ctx, db, id)
			return err
		},
	)
	trips := stop()
	if err != nil {
		t.Fatal(err)
	}
	if len(trips) != 1 || len(trips[0]) != 4 {
		t.Fatalf("round trips %v, want one of 4 statements", trips)
	}
	alone, err := q.ActorGet(ctx, e.Pool, id)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(inserted, alone) || !reflect.DeepEqual(got, alone) {
		t.Errorf("batched %+v and %+v, alone %+v", inserted, got, alone)
	}
	if credit.CreditLimitCents != 700 || !credit.Active || staff != 1 {
		t.Errorf("credit %+v, other staff %d", credit, staff)
	}
}

// Reading stops at the first error, and the server skips the rest: the
// batch is one implicit transaction outside InTx, so nothing of it stays.
func TestBatchStopsAtTheFirstError(t *testing.T) {
	t.Parallel()
	e := testkit.New(t)
	ctx := context.Background()
	q := dbsqlc.New()
	id := uuid.New()
	insert := func(db dbsqlc.DBTX) error {
		_, err := q.ActorInsert(ctx, db, dbsqlc.ActorInsertParams{ID: id, Name: "Twice", Role: "customer"})
		return err
	}
	reached := false
	err := postgres.SendBatch(ctx, e.Pool, insert, insert, func(db dbsqlc.DBTX) error {
		_, err := q.ActorGet(ctx, db, id)
		reached = err == nil
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "23505") {
		t.Fatalf("err %v, want the duplicate key", err)
	}
	if reached {
		t.Error("the call after the failed one read a result")
	}
	if n := e.QueryInt(`SELECT count(*) FROM actors WHERE id = $1`, id); n != 0 {
		t.Errorf("%d actors kept from a failed batch", n)
	}
}

// A call must make exactly one generated call, the same on both runs; the
// naive variants (none, two, another statement the second time) are
// refused instead of reading a result into the wrong call.
func TestBatchRefusesACallThatIsNotOneStatement(t *testing.T) {
	t.Parallel()
	e := testkit.New(t)
	ctx := context.Background()
	q := dbsqlc.New()
	id := uuid.New()
	get := func(db dbsqlc.DBTX) error { _, err := q.ActorGet(ctx, db, id); return err }
	runs := 0
	for name, call := range map[string]func(dbsqlc.DBTX) error{
		"none": func(dbsqlc.DBTX) error { return nil },
		"two": func(db dbsqlc.DBTX) error {
			_ = get(db)
			return get(db)
		},
		"another the second time": func(db dbsqlc.DBTX) error {
			if runs++; runs == 2 {
				_, err := q.ActorLockForOrder(ctx, db, id)
				return err
			}
			return get(db)
		},
	} {
		err := postgres.SendBatch(ctx, e.Pool, call)
		if err == nil || !strings.HasPrefix(err.Error(), "batch: ") {
			t.Errorf("%s: err %v, want the batch to refuse it", name, err)
		}
	}
}

// A call runs twice (queue, then read), so it must pass the same arguments
// both times. One that mints its id inside itself inserts the first run's
// id and keeps the second's: the batch fails with ErrBatchArguments instead
// of handing back an id that was never written.
func TestBatchFailsACallWhoseSecondRunHasOtherArguments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testkit.GuardedPool(t)
	q := dbsqlc.New()
	var kept uuid.UUID
	err := postgres.SendBatch(ctx, pool, func(db dbsqlc.DBTX) (err error) {
		kept = uuid.New() // wrong: minted inside the call, once per run
		_, err = q.ActorInsert(ctx, db, dbsqlc.ActorInsertParams{ID: kept, Name: "Minted", Role: "customer"})
		return err
	})
	if !errors.Is(err, postgres.ErrBatchArguments) {
		t.Fatalf("batch with an id minted inside the call: %v, want ErrBatchArguments", err)
	}
	// What the check prevents: the id the call kept is not the one stored.
	if n := testkit.QueryInt(t, pool, `SELECT count(*) FROM actors WHERE id = $1`, kept); n != 0 {
		t.Fatalf("the kept id was stored (%d rows): the runs passed the same id after all", n)
	}
	if n := testkit.QueryInt(t, pool, `SELECT count(*) FROM actors WHERE name = 'Minted'`); n != 1 {
		t.Fatalf("%d actors stored by the first run, want 1", n)
	}

	// The same call with its id minted before it passes.
	id := uuid.New()
	err = postgres.SendBatch(ctx, pool, func(db dbsqlc.DBTX) (err error) {
		_, err = q.ActorInsert(ctx, db, dbsqlc.ActorInsertParams{ID: id, Name: "Minted before", Role: "customer"})
		return err
	})
	if err != nil {
		t.Fatalf("batch with the id minted before the call: %v", err)
	}
}
