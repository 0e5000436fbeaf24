package app

import (
	"context"
	"crypto/rand"
	"encoding/base64"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// tokenPrefix marks the service's API tokens, so that leaked ones are easy to
// recognise in logs and secret scanners.
const tokenPrefix = "osk_"

// CreateActor creates an actor with one API token. It runs from the command
// line, not over HTTP.
//
// Invariant: an actor exists only with its token, and the token is never
// stored. Mechanism: the actor row and the token's SHA-256 are inserted in one
// transaction; the token itself is returned once, here. Codes:
// validation_failed.
type CreateActor struct{ Transactor Transactor }

// CreateActor is the use case wired to the service's transactor (Deps).
func (u UseCases) CreateActor() CreateActor { return CreateActor{Transactor: u.deps.Transactor} }

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
	err = h.Transactor.InTx(ctx, nil, ReadCommitted, func(ctx context.Context, repos Repositories) error {
		a, err := repos.Actors().Insert(ctx, domain.Actor{ID: id, Name: name, Role: role, CreditLimitCents: limit, Active: true}, HashToken(token))
		out = CreatedActor{Actor: a, Token: token}
		return err
	})
	return out, err
}
