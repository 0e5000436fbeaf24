package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ordersvc/ordersvc/internal/testkit"
)

// syncBuffer is a log sink that serve's goroutines and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeWithAReplicaThatIsDown: a READ_DATABASE_URL that cannot be
// reached at start is a warning, not a failed start, and reads are answered
// by the primary, counted as failed replica reads.
func TestServeWithAReplicaThatIsDown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan string, 1)
	done := make(chan error, 1)
	var logs syncBuffer
	db := testkit.DB(t)
	out, err := runCmd(t, env("DATABASE_URL", db), "actor", "create", "--name", "Staff", "--role", "staff")
	if err != nil {
		t.Fatal(err)
	}
	var actor struct{ Token string }
	if err := json.Unmarshal([]byte(out), &actor); err != nil {
		t.Fatalf("actor create printed %q: %v", out, err)
	}
	getenv := env("DATABASE_URL", db, "HTTP_ADDR", "127.0.0.1:0", "LOG_LEVEL", "warn",
		"READ_DATABASE_URL", unreachable)
	go func() { done <- serve(ctx, getenv, &logs, listening) }()
	var base string
	select {
	case addr := <-listening:
		base = "http://" + addr
	case err := <-done:
		t.Fatalf("serve did not start with a replica that is down: %v", err)
	}
	defer func() {
		cancel()
		<-done
	}()
	if !strings.Contains(logs.String(), "READ_DATABASE_URL") {
		t.Errorf("no warning names READ_DATABASE_URL at start:\n%s", logs.String())
	}
	client := &http.Client{Timeout: 30 * time.Second}
	req, _ := http.NewRequest("GET", base+"/v1/products", nil)
	req.Header.Set("Authorization", "Bearer "+actor.Token)
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/products with the replica down: %d", res.StatusCode)
	}
	res, err = client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	scrape, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if want := `ordersvc_replica_reads_total{outcome="failed"} 1`; !strings.Contains(string(scrape), want) {
		t.Errorf("the scrape lacks %s", want)
	}
}

// TestServeRefusesAnUnparsableReadDatabaseURL: a READ_DATABASE_URL that is
// no connection string stops the start with one line naming it.
func TestServeRefusesAnUnparsableReadDatabaseURL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	getenv := env("DATABASE_URL", testkit.DB(t), "HTTP_ADDR", "127.0.0.1:0", "LOG_LEVEL", "error",
		"READ_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/x?sslmode=bogus")
	err := serve(ctx, getenv, &syncBuffer{}, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "READ_DATABASE_URL: ") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("want one line starting READ_DATABASE_URL:, got %v", err)
	}
}
