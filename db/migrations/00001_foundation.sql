-- +goose Up
-- Actors are the callers of the API: customers place orders, staff run the catalogue.
CREATE TABLE actors (
    id                 uuid        PRIMARY KEY,
    name               text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    role               text        NOT NULL CHECK (role IN ('customer', 'staff')),
    credit_limit_cents bigint      NOT NULL DEFAULT 0 CHECK (credit_limit_cents >= 0),
    active             boolean     NOT NULL DEFAULT true,
    created_at         timestamptz NOT NULL DEFAULT now()
);
-- "At least one active staff" counts this set under SERIALIZABLE; an index
-- keeps the count (and its predicate locks) off the rest of the table.
CREATE INDEX actors_active_staff_idx ON actors (id) WHERE role = 'staff' AND active;

-- Only a SHA-256 of each token is stored; the token itself is shown once, at creation.
CREATE TABLE api_tokens (
    token_hash bytea       PRIMARY KEY CHECK (length(token_hash) = 32),
    actor_id   uuid        NOT NULL REFERENCES actors (id),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX api_tokens_actor_id_idx ON api_tokens (actor_id);

-- version is the optimistic-concurrency token behind the product's ETag
-- (EXT.CONCURRENCY.VERSION.001). It advances on every change, stock included.
-- Patterns and rule ids: docs/patterns.md.
CREATE TABLE products (
    id          uuid        PRIMARY KEY,
    sku         text        NOT NULL,
    name        text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    price_cents bigint      NOT NULL CHECK (price_cents >= 0),
    stock       bigint      NOT NULL,
    version     bigint      NOT NULL DEFAULT 1,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT products_sku_key UNIQUE (sku),
    -- The last line of defence for "stock is never negative": every guarded
    -- statement already refuses to go below zero, this refuses it anyway.
    CONSTRAINT products_stock_nonnegative CHECK (stock >= 0)
);

CREATE TABLE stock_adjustments (
    id          uuid        PRIMARY KEY,
    product_id  uuid        NOT NULL REFERENCES products (id),
    actor_id    uuid        NOT NULL REFERENCES actors (id),
    delta       bigint      NOT NULL CHECK (delta <> 0),
    reason      text        NOT NULL,
    stock_after bigint      NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX stock_adjustments_product_id_idx ON stock_adjustments (product_id);

-- One row per (actor, operation, key) (EXT.IDEMPOTENCY.KEY.001). The row is
-- inserted as 'in_progress' and turned 'completed' in the same transaction as
-- the business change, so other sessions only ever see completed rows; while
-- the owner's transaction is open, a duplicate blocks on the primary key.
-- Patterns and rule ids: docs/patterns.md.
CREATE TABLE idempotency_keys (
    actor_id         uuid        NOT NULL REFERENCES actors (id),
    operation        text        NOT NULL,
    key              text        NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    fingerprint      bytea       NOT NULL CHECK (length(fingerprint) = 32),
    state            text        NOT NULL CHECK (state IN ('in_progress', 'completed')),
    response_status  integer     CHECK (response_status BETWEEN 200 AND 299),
    response_headers jsonb,
    response_body    bytea,
    created_at       timestamptz NOT NULL DEFAULT now(),
    expires_at       timestamptz NOT NULL,
    PRIMARY KEY (actor_id, operation, key),
    CHECK (state = 'in_progress' OR response_status IS NOT NULL)
);
-- The retention purge walks this index (EXT.IDEMPOTENCY.RETENTION.001).
-- Patterns and rule ids: docs/patterns.md.
CREATE INDEX idempotency_keys_expires_at_idx ON idempotency_keys (expires_at);

-- +goose Down
DROP TABLE idempotency_keys;
DROP TABLE stock_adjustments;
DROP TABLE products;
DROP TABLE api_tokens;
DROP TABLE actors;
