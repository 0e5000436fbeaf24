package testkit

import (
	"context"
	"maps"
	"os"
	"path/filepath"
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

// TestDotEnvGivesGoTestTheDatabaseSettings: `go test` run in a package's
// directory, without make, finds the .env beside go.mod and takes its test
// settings (the database, the image, testcontainers'), and only those.
func TestDotEnvGivesGoTestTheDatabaseSettings(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	pkg := filepath.Join(root, "internal", "app")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/shop\n")
	if got := findDotEnv(pkg); got != "" {
		t.Errorf("no .env: found %q", got)
	}
	write(".env", "# local images\nDATABASE_URL=postgres://app@db/app\nexport TEST_POSTGRES_IMAGE=shop-local/postgres:15\n"+
		"TEST_DATABASE_URL=\"postgres://postgres@127.0.0.1:5432/postgres\"\nTESTCONTAINERS_RYUK_DISABLED=true\nGO_IMAGE=x\n")
	path := findDotEnv(pkg)
	if path != filepath.Join(root, ".env") {
		t.Fatalf("found %q, want the .env beside go.mod", path)
	}
	got := dotEnvTestSettings(path)
	want := map[string]string{
		"TEST_POSTGRES_IMAGE":          "shop-local/postgres:15",
		"TEST_DATABASE_URL":            "postgres://postgres@127.0.0.1:5432/postgres",
		"TESTCONTAINERS_RYUK_DISABLED": "true",
	}
	if !maps.Equal(got, want) {
		t.Errorf("settings %v, want %v", got, want)
	}
}
