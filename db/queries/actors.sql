-- name: ActorInsert :one
INSERT INTO actors (id, name, role, credit_limit_cents)
VALUES (@id, @name, @role, @credit_limit_cents)
RETURNING *;

-- name: ActorGet :one
SELECT * FROM actors WHERE id = @id;

-- name: ActorLockForOrder :one
-- Placement takes the customer's row lock first: one global lock order,
-- customer then products by id, so placements of one customer serialize on
-- the credit check and never deadlock with each other. FOR NO KEY UPDATE,
-- not FOR UPDATE: it still excludes every other placement of the customer,
-- but not the KEY SHARE locks that foreign-key checks take (the idempotency
-- record and the order both reference the actor), which FOR UPDATE would
-- turn into deadlocks.
SELECT credit_limit_cents, active FROM actors WHERE id = @id FOR NO KEY UPDATE;

-- name: ActorOutstandingCents :one
SELECT COALESCE(sum(total_cents - paid_cents), 0)::bigint AS outstanding
FROM orders
WHERE customer_id = @customer_id AND status IN ('placed', 'shipped');

-- name: ActorCountOtherActiveStaff :one
SELECT count(*) FROM actors
WHERE role = 'staff' AND active AND id <> @id;

-- name: ActorDeactivate :one
UPDATE actors SET active = false WHERE id = @id RETURNING *;

-- name: TokenInsert :exec
INSERT INTO api_tokens (token_hash, actor_id) VALUES (@token_hash, @actor_id);

-- name: ActorByTokenHash :one
SELECT a.id, a.role, a.active
FROM api_tokens t JOIN actors a ON a.id = t.actor_id
WHERE t.token_hash = @token_hash;
