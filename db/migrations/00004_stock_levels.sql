-- +goose Up
-- The stock level is an aggregate of its own (docs/adr/0006): the product row
-- keeps the catalogue (sku, name, price) and its version, which now advances
-- only on catalogue edits, so a sale never makes a price edit's If-Match
-- stale (EXT.CONCURRENCY.ADOPT.001). The stock level has its own version,
-- behind the ETag of GET /v1/products/{id}/stock; no write on stock takes
-- If-Match, every stock write is a guarded atomic statement.
CREATE TABLE stock_levels (
    product_id uuid        PRIMARY KEY REFERENCES products (id),
    stock      bigint      NOT NULL,
    version    bigint      NOT NULL DEFAULT 1,
    updated_at timestamptz NOT NULL DEFAULT now(),
    -- The last line of defence for "stock is never negative": every guarded
    -- statement already refuses to go below zero, this refuses it anyway.
    CONSTRAINT stock_levels_stock_nonnegative CHECK (stock >= 0)
);

-- What this locks: products in ACCESS EXCLUSIVE mode until the migration
-- commits, before anything is read. A service still running the previous
-- release blocks on its next statement that touches products (up to its
-- lock_timeout) instead of selling a unit between the copy and the DROP
-- COLUMN, so no unit is lost. The copy is one sequential pass over the
-- products; nothing else is locked.
LOCK TABLE products IN ACCESS EXCLUSIVE MODE;

-- Every unit moves, and the stock level starts at the product's version, so
-- no version number is issued twice for either aggregate. The product keeps
-- its version: an ETag a client holds stays valid for a catalogue edit.
INSERT INTO stock_levels (product_id, stock, version, updated_at)
SELECT id, stock, version, updated_at FROM products;

ALTER TABLE products DROP COLUMN stock;

-- +goose Down
-- The single version again: it must exceed every version either aggregate
-- issued, so that no ETag handed out since becomes current by accident.
LOCK TABLE products IN ACCESS EXCLUSIVE MODE;
ALTER TABLE products ADD COLUMN stock bigint NOT NULL DEFAULT 0;
UPDATE products p
SET stock   = s.stock,
    version = p.version + s.version
FROM stock_levels s
WHERE s.product_id = p.id;
ALTER TABLE products ALTER COLUMN stock DROP DEFAULT;
ALTER TABLE products ADD CONSTRAINT products_stock_nonnegative CHECK (stock >= 0);
DROP TABLE stock_levels;
