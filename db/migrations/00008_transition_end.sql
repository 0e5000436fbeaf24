-- contract: needs every binary older than this schema stopped (`api migrate up` checks application_name)
-- +goose NO TRANSACTION
-- +goose Up
-- The contract half of 00004 and 00005 (docs/migrations.md, ADR 0017). It
-- removes what only releases before them used: products.stock (the stock is
-- in stock_levels), the transition triggers that kept their writes correct,
-- and the index that served their credit check (the balance replaced it). It
-- may run only once every binary older than this schema has stopped: the
-- marker on the first line makes `api migrate up` refuse it while a session
-- announces an older schema, or none (releases before the announcement
-- connect as "ordersvc").
--
-- On a database that applied the earlier, single-transaction forms of 00004
-- and 00005 there is nothing left to drop, and every statement is a no-op.
-- +goose StatementBegin
SELECT set_config('lock_timeout', '1s', true);
DROP TRIGGER IF EXISTS orders_balance_transition ON orders;
-- +goose StatementEnd

-- +goose StatementBegin
SELECT set_config('lock_timeout', '1s', true);
DROP TRIGGER IF EXISTS stock_levels_transition ON stock_levels;
-- +goose StatementEnd

-- +goose StatementBegin
SELECT set_config('lock_timeout', '1s', true);
DROP TRIGGER IF EXISTS products_stock_transition ON products;
-- +goose StatementEnd

DROP FUNCTION IF EXISTS actors_balance_from_orders();
DROP FUNCTION IF EXISTS products_stock_from_stock_levels();
DROP FUNCTION IF EXISTS stock_levels_from_products();
DROP FUNCTION IF EXISTS ordersvc_announces_schema();

-- Metadata only: the column's space is reclaimed as rows are rewritten.
-- +goose StatementBegin
SELECT set_config('lock_timeout', '1s', true);
ALTER TABLE products DROP COLUMN IF EXISTS stock;
-- +goose StatementEnd

-- It served only the sum that placement no longer runs; every order write
-- would keep paying for it.
DROP INDEX CONCURRENTLY IF EXISTS orders_customer_outstanding_idx;

-- +goose Down
-- Run with the service stopped: it restores the columns, not the
-- transition triggers.
ALTER TABLE products ADD COLUMN IF NOT EXISTS stock bigint NOT NULL DEFAULT 0;
-- +goose StatementBegin
UPDATE products p SET stock = s.stock FROM stock_levels s WHERE s.product_id = p.id;
-- +goose StatementEnd
ALTER TABLE products DROP CONSTRAINT IF EXISTS products_stock_nonnegative;
ALTER TABLE products ADD CONSTRAINT products_stock_nonnegative CHECK (stock >= 0);
CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_customer_outstanding_idx ON orders (customer_id)
    INCLUDE (total_cents, paid_cents) WHERE status IN ('placed', 'shipped');
