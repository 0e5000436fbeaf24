-- +goose Up
CREATE TABLE orders (
    id          uuid        PRIMARY KEY,
    customer_id uuid        NOT NULL REFERENCES actors (id),
    status      text        NOT NULL CHECK (status IN ('placed', 'shipped', 'cancelled')),
    total_cents bigint      NOT NULL CHECK (total_cents >= 0),
    paid_cents  bigint      NOT NULL DEFAULT 0,
    version     bigint      NOT NULL DEFAULT 1,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    -- "paid_cents never exceeds total_cents", enforced by the row itself.
    CONSTRAINT orders_paid_within_total CHECK (paid_cents >= 0 AND paid_cents <= total_cents)
);
-- A customer's own orders, newest first (ids are UUIDv7, so id order is time order).
CREATE INDEX orders_customer_id_id_idx ON orders (customer_id, id DESC);
-- The credit check sums what a customer still owes; this covers it.
CREATE INDEX orders_customer_outstanding_idx ON orders (customer_id)
    INCLUDE (total_cents, paid_cents) WHERE status IN ('placed', 'shipped');

CREATE TABLE order_lines (
    order_id         uuid    NOT NULL REFERENCES orders (id),
    line_no          integer NOT NULL,
    product_id       uuid    NOT NULL REFERENCES products (id),
    quantity         integer NOT NULL CHECK (quantity BETWEEN 1 AND 1000),
    unit_price_cents bigint  NOT NULL CHECK (unit_price_cents >= 0),
    PRIMARY KEY (order_id, line_no),
    UNIQUE (order_id, product_id)
);
CREATE INDEX order_lines_product_id_idx ON order_lines (product_id);

CREATE TABLE payments (
    id           uuid        PRIMARY KEY,
    order_id     uuid        NOT NULL REFERENCES orders (id),
    actor_id     uuid        NOT NULL REFERENCES actors (id),
    amount_cents bigint      NOT NULL CHECK (amount_cents > 0),
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX payments_order_id_idx ON payments (order_id);

-- +goose Down
DROP TABLE payments;
DROP TABLE order_lines;
DROP TABLE orders;
