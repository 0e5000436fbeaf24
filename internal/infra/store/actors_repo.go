package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

type actorRepo struct{ *repositories }

// actorConstraint says what a broken constraint of actors means
// (outcomeOfConstraint): ActorChargeBalance's guard makes the new balance
// NULL past the customer's credit limit, so its NOT NULL refuses the charge.
func actorConstraint(e *pgconn.PgError) *domain.Error {
	if e.Code == sqlNotNullViolation && e.TableName == "actors" && e.ColumnName == "balance_cents" {
		return domain.ErrCreditRefused
	}
	return nil
}

func toActor(r dbsqlc.Actor) (domain.Actor, error) {
	role, err := domain.ParseRole(r.Role)
	if err != nil {
		return domain.Actor{}, fmt.Errorf("stored actor %s: %w", r.ID, err)
	}
	return domain.Actor{ID: r.ID, Name: r.Name, Role: role, CreditLimitCents: domain.Cents(r.CreditLimitCents), Active: r.Active, CreatedAt: r.CreatedAt}, nil
}

func (r actorRepo) Insert(ctx context.Context, a domain.Actor, tokenHash []byte) (domain.Actor, error) {
	row, err := r.q.ActorInsert(ctx, r.db, dbsqlc.ActorInsertParams{ID: a.ID, Name: a.Name, Role: a.Role.String(), CreditLimitCents: int64(a.CreditLimitCents)})
	if err != nil {
		return domain.Actor{}, wrap("actors.insert", err)
	}
	if err := r.q.TokenInsert(ctx, r.db, dbsqlc.TokenInsertParams{TokenHash: tokenHash, ActorID: a.ID}); err != nil {
		return domain.Actor{}, wrap("actors.insert", err)
	}
	return toActor(row)
}

func (r actorRepo) Get(ctx context.Context, id uuid.UUID) (domain.Actor, error) {
	row, err := r.q.ActorGet(ctx, r.db, id)
	if err != nil {
		return domain.Actor{}, wrap("actors.get", err)
	}
	return toActor(row)
}

func (r actorRepo) LockForOrder(ctx context.Context, id uuid.UUID) (domain.Credit, error) {
	row, err := r.q.ActorLockForOrder(ctx, r.db, id)
	if err != nil {
		return domain.Credit{}, wrap("actors.lock_for_order", err)
	}
	return toCreditState(row), nil
}

func toCreditState(r dbsqlc.ActorLockForOrderRow) domain.Credit {
	return domain.Credit{Limit: domain.Cents(r.CreditLimitCents), Balance: domain.Cents(r.BalanceCents), Active: r.Active}
}

// ChargeBalance reports a refusal of the guard as false. The refusal failed
// the statement (ActorChargeBalance), so the transaction is aborted: the
// caller can only roll back.
func (r actorRepo) ChargeBalance(ctx context.Context, customer uuid.UUID, amount domain.Cents) (bool, error) {
	err := wrap("actors.charge_balance", r.q.ActorChargeBalance(ctx, r.db, dbsqlc.ActorChargeBalanceParams{ID: customer, AmountCents: int64(amount)}))
	if errors.Is(err, domain.ErrCreditRefused) {
		return false, nil
	}
	return err == nil, err
}

func (r actorRepo) ReleaseBalance(ctx context.Context, customer uuid.UUID, amount domain.Cents) error {
	n, err := r.q.ActorReleaseBalance(ctx, r.db, dbsqlc.ActorReleaseBalanceParams{ID: customer, AmountCents: int64(amount)})
	if err != nil {
		return wrap("actors.release_balance", err)
	}
	return releaseRefused(customer, amount, n)
}

// releaseRefused turns a release that updated no row into an error: the
// balance is smaller than what the customer's orders say they still owe,
// so it differs from them. It is not the caller's doing; `api check` lists
// every such balance.
func releaseRefused(customer uuid.UUID, amount domain.Cents, rows int64) error {
	if rows == 1 {
		return nil
	}
	return fmt.Errorf("release %d cents from the balance of customer %s: the balance is missing or smaller, so it differs from the orders (run api check)", amount, customer)
}

func (r actorRepo) CountOtherActiveStaff(ctx context.Context, id uuid.UUID) (int64, error) {
	n, err := r.q.ActorCountOtherActiveStaff(ctx, r.db, id)
	return n, wrap("actors.count_other_active_staff", err)
}

func (r actorRepo) Deactivate(ctx context.Context, id uuid.UUID) (domain.Actor, error) {
	row, err := r.q.ActorDeactivate(ctx, r.db, id)
	if err != nil {
		return domain.Actor{}, wrap("actors.deactivate", err)
	}
	return toActor(row)
}

func (r actorRepo) ByTokenHash(ctx context.Context, hash []byte) (app.Principal, error) {
	row, err := r.q.ActorByTokenHash(ctx, r.db, hash)
	if err != nil {
		return app.Principal{}, wrap("actors.by_token_hash", err)
	}
	role, err := domain.ParseRole(row.Role)
	if err != nil {
		return app.Principal{}, err
	}
	return app.Principal{ID: row.ID, Role: role, Active: row.Active}, nil
}
