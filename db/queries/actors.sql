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
-- turn into deadlocks. The balance read here is current until COMMIT: every
-- write that moves it needs this row.
SELECT credit_limit_cents, balance_cents, active FROM actors WHERE id = @id FOR NO KEY UPDATE;

-- name: ActorChargeBalance :exec
-- Placement adds the order's total to the customer's outstanding balance in
-- one guarded atomic statement (pattern 2): the new value is computed by the
-- row, never in the application, and the guard refuses to pass the credit
-- limit. The guard fails the statement instead of matching no row: past the
-- limit the new balance is NULL, which the column's NOT NULL refuses (23502,
-- translated to credit_limit_exceeded). A refusal thus aborts the
-- transaction even when the charge goes out with COMMIT (the pipelined
-- placement), where a row count would be read only once committed.
-- Placement holds the row lock already, so the guard agrees with the check
-- made on the locked row and is the last line of defence.
-- Patterns and rule ids: docs/patterns.md.
UPDATE actors
SET balance_cents = CASE WHEN balance_cents + @amount_cents::bigint <= credit_limit_cents
                         THEN balance_cents + @amount_cents::bigint END
WHERE id = @id;

-- name: ActorReleaseBalance :execrows
-- A payment takes its amount off the balance, a cancellation what the order
-- still owed (pattern 2). The guard and CHECK (balance_cents >= 0) refuse to
-- go below zero, which only a balance that differs from its orders could
-- ask for; no row means that, and `api check` finds it. The limit is not
-- looked at: a limit lowered below the balance blocks new orders only.
-- Patterns and rule ids: docs/patterns.md.
UPDATE actors
SET balance_cents = balance_cents - @amount_cents::bigint
WHERE id = @id AND balance_cents - @amount_cents::bigint >= 0;

-- name: CheckBalance :many
-- `api check`, kind balance: every actor whose maintained balance differs
-- from the sum over their orders, in one statement (one snapshot, so no
-- write can fall between the two sides). It reads every order, by design.
-- Corruption: UPDATE actors SET balance_cents = balance_cents + 1 WHERE role = 'customer';
-- Finds: has balance_cents 1201 but their placed and shipped orders owe 1200 (difference +1)
SELECT format('customer %s has balance_cents %s but their placed and shipped orders owe %s (difference %s)',
              a.id, a.balance_cents, d.owed, CASE WHEN d.diff >= 0 THEN '+' ELSE '' END || d.diff) AS line
FROM actors a
LEFT JOIN (SELECT customer_id, sum(total_cents - paid_cents) AS owed
           FROM orders
           WHERE status IN ('placed', 'shipped')
           GROUP BY customer_id) o ON o.customer_id = a.id
CROSS JOIN LATERAL (SELECT COALESCE(o.owed, 0)::bigint AS owed, a.balance_cents - COALESCE(o.owed, 0)::bigint AS diff) d
WHERE d.diff <> 0
ORDER BY a.id;

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
