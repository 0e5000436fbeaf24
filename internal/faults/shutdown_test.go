package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/testkit"
)

// TestSIGTERMUnderLoad: the real binary takes orders from 16 clients over
// keep-alive connections and gets SIGTERM mid-load. Every request a client
// had written in full before the signal gets a complete response (none ends
// in a reset or a refused retry), the process exits 0, and every
// acknowledged order is in the database.
func TestSIGTERMUnderLoad(t *testing.T) {
	t.Parallel()
	bin := buildAPI(t)
	dbURL := testkit.DB(t)
	env := append([]string{"DATABASE_URL=" + dbURL, "LOG_LEVEL=warn", "DB_MAX_CONNS=8", "SHUTDOWN_DRAIN=0s"}, patientWaits...)
	staff := actorCreate(t, bin, env, "staff")
	customer := actorCreate(t, bin, env, "customer")
	srv := startAPI(t, bin, env)
	res := call(t, srv.base, "POST", "/v1/products", staff, `{"sku":"TERM-1","name":"Term test","price_cents":1,"stock":1000000}`, "")
	product := res.json["id"].(string)

	type outcome struct {
		key     string
		wrote   time.Time // when the request was written in full (zero: never)
		status  int
		orderID string
		err     error
	}
	var (
		mu       sync.Mutex
		outcomes []outcome
		acked    atomic.Int64
	)
	const clients, perClient = 16, 2000
	var wg sync.WaitGroup
	for w := range clients {
		wg.Go(func() {
			client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			for i := range perClient {
				key := fmt.Sprintf("w%d-%d", w, i)
				var wrote atomic.Int64
				trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) {
					wrote.CompareAndSwap(0, time.Now().UnixNano())
				}}
				req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace),
					"POST", srv.base+"/v1/orders", strings.NewReader(orderBody(product, 1)))
				req.Header.Set("Authorization", "Bearer "+customer)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", key)
				o := outcome{key: key}
				r, err := client.Do(req)
				if err == nil {
					var body struct{ ID string }
					err = decodeJSON(r, &body)
					o.status, o.orderID = r.StatusCode, body.ID
				}
				o.err = err
				if n := wrote.Load(); n != 0 {
					o.wrote = time.Unix(0, n)
				}
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
				if err != nil {
					return // the server is gone
				}
				if o.status == http.StatusCreated {
					acked.Add(1)
				}
			}
		})
	}
	deadline := time.Now().Add(2 * time.Minute)
	for acked.Load() < 200 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	signalled := time.Now()
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exitErr := srv.cmd.Wait()
	wg.Wait()
	if exitErr != nil {
		t.Fatalf("after SIGTERM the process exited with %v, want 0", exitErr)
	}

	var before, beforeAnswered, after, afterFailed int
	var ackedIDs []uuid.UUID
	for _, o := range outcomes {
		if o.status == http.StatusCreated {
			ackedIDs = append(ackedIDs, uuid.MustParse(o.orderID))
		}
		if !o.wrote.IsZero() && o.wrote.Before(signalled) {
			before++
			if o.err != nil || o.status == 0 {
				t.Errorf("request %s, written before the signal, got no answer: %v", o.key, o.err)
				continue
			}
			if o.status != http.StatusCreated {
				t.Errorf("request %s, written before the signal, got %d", o.key, o.status)
			}
			beforeAnswered++
			continue
		}
		after++
		if o.err != nil {
			afterFailed++
		}
	}
	db := dbConn(t, testkit.Direct(dbURL))
	var stored int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM orders WHERE id = ANY ($1)`, ackedIDs).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d requests written before SIGTERM, %d answered; %d after it (%d refused or cut, never acknowledged); %d acknowledged, %d of them stored",
		before, beforeAnswered, after, afterFailed, len(ackedIDs), stored)
	if before < 200 {
		t.Fatalf("only %d requests before the signal: the load did not run", before)
	}
	if stored != len(ackedIDs) {
		t.Fatalf("%d orders acknowledged but %d stored", len(ackedIDs), stored)
	}
}

// decodeJSON reads the whole body: an answer cut short is an error.
func decodeJSON(r *http.Response, v any) error {
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	if r.StatusCode == http.StatusCreated {
		return json.Unmarshal(b, v)
	}
	return nil
}
