package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ordersvc/ordersvc/internal/infra/postgres"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// downTo migrates the database of url down to version v.
func downTo(t *testing.T, url string, v int64) {
	t.Helper()
	_, p := testkit.Migrator(t, url)
	if _, err := p.DownTo(context.Background(), v); err != nil {
		t.Fatalf("migrate down to %d: %v", v, err)
	}
}

// startServe runs serve on url until the test ends and returns its address.
func startServe(t *testing.T, url string, h serveHooks) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan string, 1)
	done := make(chan error, 1)
	var logs lockedBuffer
	go func() {
		done <- serve(ctx, env("DATABASE_URL", url, "HTTP_ADDR", "127.0.0.1:0", "SHUTDOWN_TIMEOUT", "5s"), &logs, listening, h)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	select {
	case addr := <-listening:
		return addr
	case err := <-done:
		t.Fatalf("serve ended before listening: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not start listening")
	}
	return ""
}

// schemaBehindAnswers asks /readyz and places an order on a server whose
// database lacks 00005 (the balance) and returns what is wrong.
func schemaBehindAnswers(t *testing.T, addr string) []string {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	var wrong []string
	res, err := client.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		wrong = append(wrong, fmt.Sprintf("/readyz on an older schema answered %d (Retry-After %q), want 503 with Retry-After", res.StatusCode, res.Header.Get("Retry-After")))
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/orders", strings.NewReader(`{"lines":[]}`))
	req.Header.Set("Authorization", "Bearer osk_unknown")
	req.Header.Set("Idempotency-Key", "k1")
	res, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		wrong = append(wrong, fmt.Sprintf("POST /v1/orders on an older schema answered %d (Retry-After %q), want 503 with Retry-After", res.StatusCode, res.Header.Get("Retry-After")))
	}
	return wrong
}

// TestServeWaitsForItsSchema: on a database that lacks an expand migration
// the binary needs (00005, the balance), /readyz and /v1 answer 503 with
// Retry-After; once `api migrate up` has run, the same process becomes
// ready without a restart. The naive variant (no gate) reports ready on the
// older schema and lets the request through.
func TestServeWaitsForItsSchema(t *testing.T) {
	t.Parallel()
	t.Run("guarded", func(t *testing.T) {
		t.Parallel()
		url := testkit.DB(t)
		downTo(t, url, 4)
		addr := startServe(t, url, serveHooks{})
		for _, w := range schemaBehindAnswers(t, addr) {
			t.Error(w)
		}
		if out, err := runCmd(t, env("DATABASE_URL", testkit.Direct(url)), "migrate", "up"); err != nil {
			t.Fatalf("migrate up: %v %s", err, out)
		}
		waitFor(t, 30*time.Second, "/readyz answers 200 after the migration", func() bool {
			res, err := http.Get("http://" + addr + "/readyz")
			if err != nil {
				return false
			}
			res.Body.Close()
			return res.StatusCode == http.StatusOK
		})
	})
	t.Run("naive", func(t *testing.T) {
		t.Parallel()
		url := testkit.DB(t)
		downTo(t, url, 4)
		addr := startServe(t, url, serveHooks{noSchemaGate: true})
		if wrong := schemaBehindAnswers(t, addr); len(wrong) == 0 {
			t.Error("the naive server (no schema gate) answered like the guarded one")
		} else {
			t.Logf("naive variant caught, as expected: %s", strings.Join(wrong, "; "))
		}
	})
}

// TestServeAnnouncesItsSchema: every connection of `api serve` says the
// schema it was built for in application_name.
func TestServeAnnouncesItsSchema(t *testing.T) {
	t.Parallel()
	url := testkit.DB(t)
	startServe(t, url, serveHooks{})
	schema, err := postgres.EmbeddedSchema()
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("ordersvc serve schema=%d", schema.Built)
	conn, err := pgx.Connect(context.Background(), testkit.Direct(url))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(),
		`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`, want).Scan(&n); err != nil || n == 0 {
		t.Errorf("no session announces %q (%v)", want, err)
	}
	if v, service := postgres.AnnouncedSchema(want); !service || v != schema.Built {
		t.Errorf("AnnouncedSchema(%q) = %d, %v", want, v, service)
	}
	if v, service := postgres.AnnouncedSchema("ordersvc"); !service || v != 0 {
		t.Errorf("a release before the announcement: %d, %v; want 0, true", v, service)
	}
	if _, service := postgres.AnnouncedSchema("psql"); service {
		t.Error("psql counted as a session of the service")
	}
}

// TestMigrateRefusesAContractWhileOlderBinariesAreConnected: with a session
// connected as a release before the announcement ("ordersvc"), `api migrate
// up` applies the expand migrations, refuses the contract one with a message
// that says what to do, and applies it with --force-contract; once the old
// session is gone, it applies it without the flag.
func TestMigrateRefusesAContractWhileOlderBinariesAreConnected(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testkit.DB(t)
	direct := testkit.Direct(url)
	getenv := env("DATABASE_URL", direct)
	schema, err := postgres.EmbeddedSchema()
	if err != nil {
		t.Fatal(err)
	}
	const contract = 8
	if !schema.IsContract(contract) {
		t.Fatalf("00008 is not marked as a contract migration")
	}
	for round, force := range []bool{false, true} {
		downTo(t, url, 4)
		cfg, err := pgx.ParseConfig(direct)
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["application_name"] = "ordersvc"
		old, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = runCmd(t, getenv, "migrate", "up")
		if err == nil || !errors.Is(err, postgres.ErrOlderBinaries) || !strings.Contains(err.Error(), "00008") || !strings.Contains(err.Error(), "--force-contract") {
			t.Fatalf("round %d: migrate up with an old binary connected: %v; want a refusal naming 00008 and --force-contract", round, err)
		}
		out, err := runCmd(t, getenv, "migrate", "status")
		if err != nil || !strings.Contains(out, "pending (contract)") {
			t.Fatalf("round %d: status: %v\n%s", round, err, out)
		}
		if strings.Contains(out, "00005_actor_balance.sql                  pending") {
			t.Errorf("round %d: the expand migration 00005 was not applied before the refusal:\n%s", round, out)
		}
		if force {
			out, err = runCmd(t, getenv, "migrate", "up", "--force-contract")
		} else {
			old.Close(ctx)
			out, err = runCmd(t, getenv, "migrate", "up")
		}
		if err != nil || !strings.Contains(out, "00008_transition_end.sql") {
			t.Fatalf("round %d (force %v): migrate up: %v %q", round, force, err, out)
		}
		old.Close(ctx)
	}
}
