package app

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// tokenPrefix marks the service's API tokens, so that leaked ones are easy to
// recognise in logs and secret scanners.
const tokenPrefix = "osk_"

// HashToken is how a token is stored and looked up: only its SHA-256 is kept.
func HashToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// CreateActor creates an actor with one API token. It runs from the command
// line, not over HTTP. The token is returned once and stored only as a hash.
type CreateActor struct{ Transactor Transactor }

// CreateActorCommand is the input of CreateActor.
type CreateActorCommand struct {
	Name             string
	Role             string
	CreditLimitCents int64
}

// CreatedActor is the result of CreateActor.
type CreatedActor struct {
	Actor domain.Actor
	Token string
}

// Handle runs the command.
func (h CreateActor) Handle(ctx context.Context, cmd CreateActorCommand) (CreatedActor, error) {
	var v domain.Validation
	name, err := domain.ParseName(cmd.Name)
	v.Merge("name", err)
	role, err := domain.ParseRole(cmd.Role)
	v.Merge("role", err)
	limit, err := domain.ParseCents(cmd.CreditLimitCents)
	v.Merge("credit_limit_cents", err)
	if err := v.Err(); err != nil {
		return CreatedActor{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return CreatedActor{}, err
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return CreatedActor{}, err
	}
	token := tokenPrefix + base64.RawURLEncoding.EncodeToString(secret)
	var out CreatedActor
	err = h.Transactor.InTx(ctx, ReadCommitted, func(ctx context.Context, repos Repositories) error {
		a, err := repos.Actors().Insert(ctx, domain.Actor{ID: id, Name: name, Role: role, CreditLimitCents: limit, Active: true}, HashToken(token))
		out = CreatedActor{Actor: a, Token: token}
		return err
	})
	return out, err
}

// DeactivateActor stops an actor: its tokens stop working at once.
//
// Invariant: at least one active staff actor always remains. This is a write
// skew: two staff deactivating each other each see the other still active,
// and no single row lock covers "the set of active staff". Mechanism:
// SERIALIZABLE (pattern 7) with the runner's bounded, jittered
// whole-transaction retry; after the retry the loser sees the winner's commit
// and gets last_staff. Codes: forbidden, not_found, last_staff.
type DeactivateActor struct{ Transactor Transactor }

// DeactivateActorCommand is the input of DeactivateActor.
type DeactivateActorCommand struct {
	ID uuid.UUID
}

// Handle runs the command.
func (h DeactivateActor) Handle(ctx context.Context, cmd DeactivateActorCommand, call Call[domain.Actor]) (Outcome, error) {
	if err := requireStaff(call.Principal); err != nil {
		return Outcome{}, err
	}
	return execute(ctx, h.Transactor, Serializable, call, func(ctx context.Context, repos Repositories) (domain.Actor, error) {
		a, err := repos.Actors().Get(ctx, cmd.ID)
		if err != nil {
			return domain.Actor{}, err
		}
		if a.Role == domain.RoleStaff && a.Active {
			others, err := repos.Actors().CountOtherActiveStaff(ctx, a.ID)
			if err != nil {
				return domain.Actor{}, err
			}
			if others == 0 {
				return domain.Actor{}, domain.Errorf(domain.CodeLastStaff, "actor %s is the last active staff member", a.ID)
			}
		}
		return repos.Actors().Deactivate(ctx, a.ID)
	})
}
