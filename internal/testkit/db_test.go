package testkit

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

func TestDBIsMigratedAndPrivate(t *testing.T) {
	t.Parallel()
	a, b := DB(t), DB(t)
	if a == b {
		t.Fatalf("two tests got the same database %s", a)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO actors (id, name, role) VALUES (gen_random_uuid(), 'x', 'staff')`); err != nil {
		t.Fatalf("schema missing in the test database: %v", err)
	}
	other, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	var n int
	if err := other.QueryRow(ctx, `SELECT count(*) FROM actors`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("databases are not private: %d actors, %v", n, err)
	}
}
