-- +goose NO TRANSACTION
-- +goose Up
-- The stock level is an aggregate of its own (docs/adr/0006): the product row
-- keeps the catalogue (sku, name, price) and its version, which now advances
-- only on catalogue edits, so a sale never makes a price edit's If-Match
-- stale (EXT.CONCURRENCY.ADOPT.001). The stock level has its own version,
-- behind the ETag of GET /v1/products/{id}/stock; no write on stock takes
-- If-Match, every stock write is a guarded atomic statement.
--
-- This is the expand half (docs/migrations.md, ADR 0017): it runs while the
-- previous release, which keeps the stock on the product row, still serves.
-- Both copies of the stock stay equal until 00008, the contract half, drops
-- products.stock once every binary older than this schema has stopped:
-- a write of a session that announces no schema in application_name (the
-- previous release) moves stock_levels too, and a write of one that does (this
-- release) moves products.stock too. Each statement runs in its own short
-- transaction with lock_timeout 1s (below the service's DB_LOCK_TIMEOUT), so
-- no request ever queues behind it for longer; `api migrate up` tries again
-- when it runs out. Every statement can run twice.
--
-- Databases that applied the earlier, single-transaction form of this
-- migration (which dropped products.stock at once) are unaffected: goose does
-- not run an applied migration again, and 00008 finds nothing left to drop.
-- Its foreign key takes SHARE ROW EXCLUSIVE on products for an instant.
-- Patterns and rule ids: docs/patterns.md.
-- +goose StatementBegin
SELECT set_config('lock_timeout', '1s', true);
CREATE TABLE IF NOT EXISTS stock_levels (
    product_id uuid        PRIMARY KEY REFERENCES products (id),
    stock      bigint      NOT NULL,
    version    bigint      NOT NULL DEFAULT 1,
    updated_at timestamptz NOT NULL DEFAULT now(),
    -- The last line of defence for "stock is never negative": every guarded
    -- statement already refuses to go below zero, this refuses it anyway.
    CONSTRAINT stock_levels_stock_nonnegative CHECK (stock >= 0)
);
-- +goose StatementEnd

-- This release inserts products without a stock: metadata only.
-- +goose StatementBegin
SELECT set_config('lock_timeout', '1s', true);
ALTER TABLE products ALTER COLUMN stock SET DEFAULT 0;
-- +goose StatementEnd

-- Whether the session announces the schema it was built for
-- ("ordersvc serve schema=8"): releases from this one on do; earlier ones
-- connect as "ordersvc".
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ordersvc_announces_schema() RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT current_setting('application_name') ~ '^ordersvc [a-z-]+ schema=[0-9]+$'
$$;
-- +goose StatementEnd

-- A write of the previous release (products.stock) moves the stock level.
-- Until the copy below reaches a product, the first write inserts its stock
-- level with the product's stock after the write; the copy then skips it.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION stock_levels_from_products() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF ordersvc_announces_schema() THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO stock_levels (product_id, stock, version, updated_at)
        VALUES (NEW.id, NEW.stock, NEW.version, NEW.updated_at)
        ON CONFLICT (product_id) DO NOTHING;
    ELSIF NEW.stock IS DISTINCT FROM OLD.stock THEN
        INSERT INTO stock_levels AS s (product_id, stock, version, updated_at)
        VALUES (NEW.id, NEW.stock, NEW.version, now())
        ON CONFLICT (product_id) DO UPDATE
        SET stock = s.stock + (NEW.stock - OLD.stock), version = s.version + 1, updated_at = now();
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- A write of this release (stock_levels) moves products.stock, which the
-- previous release still reads and guards.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION products_stock_from_stock_levels() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT ordersvc_announces_schema() THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        UPDATE products SET stock = NEW.stock WHERE id = NEW.product_id;
    ELSIF NEW.stock IS DISTINCT FROM OLD.stock THEN
        UPDATE products SET stock = stock + (NEW.stock - OLD.stock) WHERE id = NEW.product_id;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
SELECT set_config('lock_timeout', '1s', true);
DROP TRIGGER IF EXISTS products_stock_transition ON products;
CREATE TRIGGER products_stock_transition AFTER INSERT OR UPDATE OF stock ON products
    FOR EACH ROW EXECUTE FUNCTION stock_levels_from_products();
-- +goose StatementEnd

-- +goose StatementBegin
SELECT set_config('lock_timeout', '1s', true);
DROP TRIGGER IF EXISTS stock_levels_transition ON stock_levels;
CREATE TRIGGER stock_levels_transition AFTER INSERT OR UPDATE OF stock ON stock_levels
    FOR EACH ROW EXECUTE FUNCTION products_stock_from_stock_levels();
-- +goose StatementEnd

-- The copy, 1,000 products per transaction, in id order, outside any DDL
-- transaction. Every unit moves, and the stock level starts at the product's
-- version, so no version number is issued twice for either aggregate; the
-- product keeps its version (an ETag a client holds stays valid for a
-- catalogue edit). A product that a sale is changing right now waits for it
-- (ON CONFLICT on the stock level that sale's trigger inserted) or is
-- corrected by that sale's trigger afterwards: no unit is lost either way.
-- +goose StatementBegin
DO $$
DECLARE
    after_id uuid := '00000000-0000-0000-0000-000000000000';
    last_id  uuid;
BEGIN
    LOOP
        PERFORM set_config('lock_timeout', '1s', true);
        SELECT id INTO last_id
        FROM (SELECT id FROM products WHERE id > after_id ORDER BY id LIMIT 1000) b
        ORDER BY id DESC LIMIT 1;
        EXIT WHEN last_id IS NULL;
        INSERT INTO stock_levels (product_id, stock, version, updated_at)
        SELECT id, stock, version, updated_at FROM products
        WHERE id > after_id AND id <= last_id
        ON CONFLICT (product_id) DO NOTHING;
        after_id := last_id;
        COMMIT;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- The single version again: it must exceed every version either aggregate
-- issued, so that no ETag handed out since becomes current by accident.
DROP TRIGGER IF EXISTS products_stock_transition ON products;
DROP TRIGGER IF EXISTS stock_levels_transition ON stock_levels;
DROP FUNCTION IF EXISTS stock_levels_from_products();
DROP FUNCTION IF EXISTS products_stock_from_stock_levels();
DROP FUNCTION IF EXISTS ordersvc_announces_schema();
-- +goose StatementBegin
UPDATE products p
SET stock   = s.stock,
    version = p.version + s.version
FROM stock_levels s
WHERE s.product_id = p.id;
-- +goose StatementEnd
ALTER TABLE products ALTER COLUMN stock DROP DEFAULT;
DROP TABLE stock_levels;
