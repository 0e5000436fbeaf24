// Command upgrade is the rolling-upgrade test (docs/migrations.md): it builds
// the previous release's binary from git, serves it as two replicas under
// steady placements, payments and cancellations, runs the new `api migrate
// up`, rolls the replicas to the new binary one at a time, runs `api migrate
// up` again for the contract migrations, and then counts what the clients
// saw and what the database holds. It exits 1 when a goal is missed.
//
//	go run ./.ci/upgrade/main.go -admin postgres://postgres@127.0.0.1:5432/postgres [-from COMMIT] [-to COMMIT] [-variant fixed|naive]
//
// -to builds the new release from a commit instead of this tree: one hop of
// an upgrade through an upgrade stop (docs/migrations.md). -stops prints
// the stops between -from and this tree, one commit a line, and exits:
// .ci/upgrade-check.sh runs one hop to each, then on to this tree.
//
// -variant naive builds the new binary with the unsafe 00005 kept in
// .ci/upgrade/testdata (one transaction that locks orders, then actors, and
// sums the balance while the previous release keeps placing orders): the
// same run must then fail. It is not part of `make test`; .ci/run runs it
// with a fixed budget (.ci/upgrade-check.sh).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ordersvc/ordersvc/internal/infra/postgres"
)

var (
	admin    = flag.String("admin", os.Getenv("TEST_DATABASE_URL"), "superuser connection string of a PostgreSQL 14 or later")
	from     = flag.String("from", "", "commit of the previous release [the parent of the commit that added db/migrations/00005_actor_balance.sql]")
	to       = flag.String("to", "", "commit of the new release [this tree]")
	stops    = flag.Bool("stops", false, "print the upgrade stops between -from and this tree, one commit a line, and exit")
	variant  = flag.String("variant", "fixed", "fixed: this tree; naive: this tree with the unsafe 00005 of .ci/upgrade/testdata")
	phase    = flag.Duration("phase", 3*time.Second, "how long the load runs between two steps")
	clients  = flag.Int("clients", 8, "concurrent clients, one customer each")
	basePort = flag.Int("port", 18181, "first of four HTTP ports")
	lockMax  = flag.Duration("lock-timeout", time.Second, "the migrations' lock_timeout: no lock wait may exceed it")
)

func main() {
	flag.Parse()
	run := run
	if *stops {
		run = printStops
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "upgrade:", err)
		os.Exit(1)
	}
}

// resolveFrom sets -from to its default, the parent of the commit that
// added 00005, and checks that the commit is in this clone.
func resolveFrom() error {
	if *from == "" {
		added, err := addedBy("db/migrations/00005_actor_balance.sql")
		if err != nil {
			return fmt.Errorf("%v: pass -from COMMIT", err)
		}
		*from = added + "^"
	}
	if _, err := gitOut("cat-file", "-e", *from+"^{commit}"); err != nil {
		return fmt.Errorf("commit %s is not in this clone (fetch more history, e.g. git fetch --unshallow): %v", *from, err)
	}
	return nil
}

// addedBy is the commit that added the files of pathspec, the oldest if
// several did.
func addedBy(pathspec string) (string, error) {
	added, err := gitOut("log", "--diff-filter=A", "--format=%H", "--", pathspec)
	if err != nil || added == "" {
		return "", fmt.Errorf("cannot find the commit that added %s in this clone's history (a shallow clone?)", pathspec)
	}
	lines := strings.Fields(added)
	return lines[len(lines)-1], nil
}

// printStops prints the upgrade stops between -from and this tree
// (docs/migrations.md), oldest first: for each contract migration of this
// tree that -from lacks and that an expand migration follows
// (postgres.Schema, as `api migrate up` reads them), the commit before the
// first such expand migration was added, which must hold the contract.
func printStops() error {
	if err := resolveFrom(); err != nil {
		return err
	}
	schema, err := postgres.EmbeddedSchema()
	if err != nil {
		return err
	}
	have, err := migrationsAt(*from)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, v := range schema.Contracts() {
		later := schema.ExpandAfter(v)
		if have[v] || len(later) == 0 {
			continue
		}
		added, err := addedBy(fmt.Sprintf("db/migrations/%05d_*.sql", later[0]))
		if err != nil {
			return err
		}
		stop, err := gitOut("rev-parse", "--short", added+"^")
		if err != nil {
			return err
		}
		if at, err := migrationsAt(stop); err != nil || !at[v] {
			return fmt.Errorf("no release between %05d and %05d in this clone's history (both added in one commit?)", v, later[0])
		}
		if !seen[stop] {
			seen[stop] = true
			fmt.Println(stop)
		}
	}
	return nil
}

// migrationsAt lists the versions of the migrations in commit's tree.
func migrationsAt(commit string) (map[int64]bool, error) {
	names, err := gitOut("ls-tree", "--name-only", commit, "db/migrations/")
	if err != nil {
		return nil, fmt.Errorf("migrations at %s: %v", commit, err)
	}
	out := map[int64]bool{}
	for _, name := range strings.Fields(names) {
		num, _, _ := strings.Cut(filepath.Base(name), "_")
		if v, err := strconv.ParseInt(num, 10, 64); err == nil && strings.HasSuffix(name, ".sql") {
			out[v] = true
		}
	}
	return out, nil
}

func run() error {
	if *admin == "" {
		return errors.New("no database: set -admin or TEST_DATABASE_URL to a superuser connection string")
	}
	root, err := gitOut("rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	if err := resolveFrom(); err != nil {
		return err
	}
	fromSHA, _ := gitOut("rev-parse", "--short", *from)
	tmp, err := os.MkdirTemp("", "ordersvc-upgrade-")
	if err != nil {
		return err
	}
	if os.Getenv("UPGRADE_KEEP") == "" {
		defer os.RemoveAll(tmp)
	}
	fmt.Println("work directory:", tmp)

	step("build the previous release %s", fromSHA)
	oldBin := filepath.Join(tmp, "api-old")
	if err := buildAt(root, *from, filepath.Join(tmp, "old"), oldBin); err != nil {
		return err
	}
	toName := "this tree"
	if *to != "" {
		if _, err := gitOut("cat-file", "-e", *to+"^{commit}"); err != nil {
			return fmt.Errorf("commit %s is not in this clone (fetch more history, e.g. git fetch --unshallow): %v", *to, err)
		}
		toName, _ = gitOut("rev-parse", "--short", *to)
	}
	step("build the new binary (%s, %s)", toName, *variant)
	newBin := filepath.Join(tmp, "api-new")
	src := root
	switch {
	case *to != "":
		src = filepath.Join(tmp, "new")
		if err := extractAt(root, *to, src); err != nil {
			return err
		}
	case *variant == "naive":
		src = filepath.Join(tmp, "naive")
		if err := copyTree(root, src); err != nil {
			return err
		}
	}
	if *variant == "naive" {
		unsafe, err := os.ReadFile(filepath.Join(root, ".ci/upgrade/testdata/00005_actor_balance_unsafe.sql"))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(src, "db/migrations/00005_actor_balance.sql"), unsafe, 0o644); err != nil {
			return err
		}
	} else if *variant != "fixed" {
		return fmt.Errorf("-variant %q: fixed or naive", *variant)
	}
	if err := goBuild(src, newBin); err != nil {
		return err
	}

	ctx := context.Background()
	dbName := "ordersvc_upgrade_" + *variant + "_" + fromSHA + "_" + strings.ReplaceAll(toName, " ", "_")
	dbURL, err := freshDatabase(ctx, *admin, dbName)
	if err != nil {
		return err
	}
	step("migrate with the previous release and create the actors and products")
	if out, err := command(oldBin, dbURL, nil, "migrate", "up"); err != nil {
		return fmt.Errorf("old migrate up: %v\n%s", err, out)
	}
	staff, err := createActor(oldBin, dbURL, "staff")
	if err != nil {
		return err
	}
	customers := make([]string, *clients)
	for i := range customers {
		if customers[i], err = createActor(oldBin, dbURL, "customer"); err != nil {
			return err
		}
	}

	lb := &balancer{}
	logs := filepath.Join(tmp, "logs")
	_ = os.MkdirAll(logs, 0o755)
	oldA, err := startReplica(oldBin, dbURL, *basePort, logs, "old-a")
	if err != nil {
		return err
	}
	oldB, err := startReplica(oldBin, dbURL, *basePort+1, logs, "old-b")
	if err != nil {
		return err
	}
	lb.add(oldA)
	lb.add(oldB)
	products, err := createProducts(lb, staff, 12)
	if err != nil {
		return err
	}

	st := &stats{status: map[int]int64{}}
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, token := range customers {
		wg.Go(func() { client(loadCtx, lb, st, token, products, i) })
	}
	time.Sleep(*phase)

	step("new `api migrate up` while the previous release serves")
	mig1, err := migrate(ctx, newBin, dbURL)
	fmt.Printf("%s", mig1.out)
	if err != nil {
		fmt.Printf("   (exit: %v)\n", err)
	}
	time.Sleep(*phase)

	step("roll the replicas one at a time")
	var newReps []*replica
	stalled := false
	for i, old := range []*replica{oldA, oldB} {
		r, err := startReplica(newBin, dbURL, *basePort+2+i, logs, fmt.Sprintf("new-%c", 'a'+i))
		if err != nil {
			stopLoad()
			return err
		}
		if err := r.waitReady(20 * time.Second); err != nil {
			// The rollout stalls, as an orchestrator's would: the old
			// replica keeps serving.
			fmt.Printf("   new replica %s not ready, the rollout stalls: %v\n", r.name, err)
			stalled = true
			r.stop()
			break
		}
		lb.add(r)
		newReps = append(newReps, r)
		// The load balancer takes the old replica out, then it gets SIGTERM
		// (releases before SHUTDOWN_DRAIN close at once, finishing the
		// requests they received).
		lb.remove(old)
		time.Sleep(300 * time.Millisecond)
		old.stop()
		time.Sleep(*phase)
	}

	step("`api migrate up` again: the contract migrations, every old binary gone")
	mig2, err2 := migrate(ctx, newBin, dbURL)
	fmt.Printf("%s", mig2.out)
	if err2 != nil {
		fmt.Printf("   (exit: %v)\n", err2)
	}
	time.Sleep(*phase)
	stopLoad()
	wg.Wait()
	for _, r := range newReps {
		lb.remove(r)
		r.stop()
	}
	for _, r := range []*replica{oldA, oldB} {
		r.stop()
	}

	step("count")
	lost, err := lostOrders(ctx, dbURL, st.acked())
	if err != nil {
		return err
	}
	checkOut, checkErr := command(newBin, dbURL, nil, "check")
	checkExit := 0
	if checkErr != nil {
		checkExit = 1
	}
	maxWait := max(mig1.maxLockWait, mig2.maxLockWait)
	fmt.Printf("\nupgrade %s from %s to %s (%s):\n", *variant, fromSHA, toName, strings.TrimSpace(mig1.summary()+" "+mig2.summary()))
	fmt.Printf("  requests               %d (%d clients)\n", st.requests.Load(), *clients)
	fmt.Printf("  by status              %s\n", st.byStatus())
	fmt.Printf("  non-2xx other than 409/422/503: %d; 503 with Retry-After (retried with the same key): %d, without: %d; transport errors retried: %d\n",
		st.unexpected(), st.count(503)-st.bare503.Load(), st.bare503.Load(), st.transport.Load())
	fmt.Printf("  acknowledged orders    %d, lost %d\n", len(st.acked()), lost)
	fmt.Printf("  api check              exit %d %s\n", checkExit, firstLines(checkOut, 3))
	fmt.Printf("  migration lock waits   max %s (lock_timeout %s), %d samples waiting\n", maxWait.Round(time.Millisecond), *lockMax, mig1.waitSamples+mig2.waitSamples)
	var failed []string
	if st.unexpected() > 0 {
		failed = append(failed, fmt.Sprintf("%d responses other than 2xx, 409, 422 and 503", st.unexpected()))
	}
	if n := st.bare503.Load(); n > 0 {
		failed = append(failed, fmt.Sprintf("%d 503 responses without Retry-After", n))
	}
	if lost > 0 {
		failed = append(failed, fmt.Sprintf("%d acknowledged orders lost", lost))
	}
	if checkExit != 0 {
		failed = append(failed, "api check failed")
	}
	if stalled {
		failed = append(failed, "the rollout stalled: a new replica never became ready")
	}
	if err := mig2.err; err != nil || mig1.err != nil && !strings.Contains(mig1.out, "contract migration") {
		failed = append(failed, "a migration failed")
	}
	if maxWait > *lockMax+250*time.Millisecond {
		failed = append(failed, fmt.Sprintf("a migration waited %s for a lock", maxWait.Round(time.Millisecond)))
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s: %s", *variant, strings.Join(failed, "; "))
	}
	fmt.Printf("upgrade %s: every goal met\n", *variant)
	return nil
}

func step(format string, args ...any) { fmt.Printf("==> "+format+"\n", args...) }

func gitOut(args ...string) (string, error) {
	out, err := exec.Command("git", args...).Output()
	return strings.TrimSpace(string(out)), err
}

// buildAt builds cmd/api of commit into bin from a copy of its tree
// (extractAt), leaving the clone's worktrees alone.
func buildAt(root, commit, dir, bin string) error {
	if err := extractAt(root, commit, dir); err != nil {
		return err
	}
	return goBuild(dir, bin)
}

// extractAt writes commit's tree into dir (git archive).
func extractAt(root, commit, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, commit, dir)
	if out, err := archive.CombinedOutput(); err != nil {
		return fmt.Errorf("git archive %s: %v\n%s", commit, err, out)
	}
	return nil
}

func goBuild(dir, bin string) error {
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/api")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build in %s: %v\n%s", dir, err, out)
	}
	return nil
}

// copyTree copies what building cmd/api needs.
func copyTree(root, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, p := range []string{"go.mod", "go.sum", "cmd", "internal", "db"} {
		if out, err := exec.Command("cp", "-r", filepath.Join(root, p), filepath.Join(dst, p)).CombinedOutput(); err != nil {
			return fmt.Errorf("copy %s: %v %s", p, err, out)
		}
	}
	return nil
}

func freshDatabase(ctx context.Context, adminURL, name string) (string, error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", fmt.Errorf("connect to %s: %w", adminURL, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

func command(bin, dbURL string, extra []string, args ...string) (string, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "MIGRATE_DATABASE_URL="+dbURL, "LOG_LEVEL=warn")
	cmd.Env = append(cmd.Env, extra...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func createActor(bin, dbURL, role string) (string, error) {
	args := []string{"actor", "create", "--name", "Upgrade " + role, "--role", role}
	if role == "customer" {
		args = append(args, "--credit-limit-cents", "100000000000")
	}
	out, err := command(bin, dbURL, nil, args...)
	if err != nil {
		return "", fmt.Errorf("actor create: %v %s", err, out)
	}
	var v struct{ Token string }
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &v); err != nil {
		return "", fmt.Errorf("actor create printed %q", out)
	}
	return v.Token, nil
}

// migration is one `api migrate up` run and the lock waits seen during it.
type migration struct {
	out         string
	err         error
	took        time.Duration
	maxLockWait time.Duration
	waitSamples int
}

func (m migration) summary() string {
	if m.out == "" {
		return ""
	}
	return fmt.Sprintf("migrate %s", m.took.Round(time.Millisecond))
}

// migrate runs `api migrate up` and samples, every 20 ms, how long its
// sessions have been waiting for a lock (pg_locks.waitstart).
func migrate(ctx context.Context, bin, dbURL string) (migration, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return migration{}, err
	}
	defer conn.Close(ctx)
	var m migration
	done := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			var secs float64
			err := conn.QueryRow(ctx, `SELECT coalesce(max(extract(epoch FROM clock_timestamp() - l.waitstart)), 0)
				FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
				WHERE NOT l.granted AND a.application_name LIKE 'ordersvc migrate%'`).Scan(&secs)
			if err == nil && secs > 0 {
				m.waitSamples++
				m.maxLockWait = max(m.maxLockWait, time.Duration(secs*float64(time.Second)))
			}
		}
	})
	start := time.Now()
	m.out, m.err = command(bin, dbURL, []string{"LOG_LEVEL=info"}, "migrate", "up")
	m.took = time.Since(start)
	close(done)
	sampler.Wait()
	return m, m.err
}

func lostOrders(ctx context.Context, dbURL string, ids []string) (int, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var found int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM orders WHERE id::text = ANY($1)`, ids).Scan(&found); err != nil {
		return 0, err
	}
	return len(ids) - found, nil
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = append(lines[:n], fmt.Sprintf("... (%d lines)", len(lines)))
	}
	if len(lines) == 1 && lines[0] == "" {
		return ""
	}
	return "\n    " + strings.Join(lines, "\n    ")
}

// ---- replicas and the load balancer

type replica struct {
	name string
	base string
	cmd  *exec.Cmd
	done chan struct{}
}

func startReplica(bin, dbURL string, port int, logs, name string) (*replica, error) {
	f, err := os.Create(filepath.Join(logs, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, fmt.Sprintf("HTTP_ADDR=127.0.0.1:%d", port),
		"SHUTDOWN_DRAIN=1s", "LOG_LEVEL=warn", "CLEANUP_INTERVAL=1h")
	cmd.Stdout, cmd.Stderr = f, f
	// A replica never outlives the test, even one that crashed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if res, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port)); err == nil {
		res.Body.Close()
		return nil, fmt.Errorf("port %d is taken by another server: pass -port", port)
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &replica{name: name, base: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); f.Close(); close(r.done) }()
	if err := r.waitReady(60 * time.Second); err != nil && strings.HasPrefix(name, "old") {
		return nil, err
	}
	return r, nil
}

func (r *replica) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		res, err := http.Get(r.base + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-r.done:
			return fmt.Errorf("%s exited", r.name)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s: /readyz not 200 within %s", r.name, limit)
}

func (r *replica) stop() {
	select {
	case <-r.done:
		return
	default:
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(60 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}

// balancer is the clients' load balancer: round robin over the replicas in
// rotation.
type balancer struct {
	mu   sync.Mutex
	reps []*replica
	n    int
}

func (b *balancer) add(r *replica) { b.mu.Lock(); b.reps = append(b.reps, r); b.mu.Unlock() }

func (b *balancer) remove(r *replica) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, x := range b.reps {
		if x == r {
			b.reps = append(b.reps[:i], b.reps[i+1:]...)
			return
		}
	}
}

func (b *balancer) pick() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n++
	return b.reps[b.n%len(b.reps)].base
}

// ---- the clients

type stats struct {
	requests  atomic.Int64
	transport atomic.Int64
	// bare503 counts 503s without Retry-After.
	bare503 atomic.Int64
	mu      sync.Mutex
	status  map[int]int64
	orders  []string
}

func (s *stats) record(code int) {
	s.requests.Add(1)
	s.mu.Lock()
	s.status[code]++
	s.mu.Unlock()
}

func (s *stats) count(code int) int64 { s.mu.Lock(); defer s.mu.Unlock(); return s.status[code] }

func (s *stats) unexpected() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for code, c := range s.status {
		if code/100 != 2 && code != 409 && code != 422 && code != 503 {
			n += c
		}
	}
	return n
}

func (s *stats) byStatus() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var parts []string
	for _, code := range []int{200, 201, 409, 422, 500, 503} {
		if s.status[code] > 0 {
			parts = append(parts, fmt.Sprintf("%d: %d", code, s.status[code]))
		}
	}
	for code, c := range s.status {
		switch code {
		case 200, 201, 409, 422, 500, 503:
		default:
			parts = append(parts, fmt.Sprintf("%d: %d", code, c))
		}
	}
	return strings.Join(parts, ", ")
}

func (s *stats) ack(id string) { s.mu.Lock(); s.orders = append(s.orders, id); s.mu.Unlock() }

func (s *stats) acked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.orders...)
}

var httpClient = &http.Client{Timeout: 30 * time.Second}

type response struct {
	code int
	etag string
	body map[string]any
}

// send sends one logical request, retrying it with the same idempotency key
// after a transport error or a 503 (what the key is for); every answer is
// counted.
func send(ctx context.Context, lb *balancer, st *stats, method, path, token string, body any, headers ...string) (response, bool) {
	var payload []byte
	if body != nil {
		payload, _ = json.Marshal(body)
	}
	for attempt := 0; attempt < 50 && ctx.Err() == nil; attempt++ {
		req, _ := http.NewRequest(method, lb.pick()+path, bytes.NewReader(payload))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		res, err := httpClient.Do(req)
		if err != nil {
			st.transport.Add(1)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		st.record(res.StatusCode)
		r := response{code: res.StatusCode, etag: res.Header.Get("ETag")}
		_ = json.Unmarshal(raw, &r.body)
		if res.StatusCode == http.StatusServiceUnavailable {
			if res.Header.Get("Retry-After") == "" {
				st.bare503.Add(1)
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if res.StatusCode/100 == 5 {
			fmt.Printf("   %s %s: %d %s\n", method, path, res.StatusCode, strings.TrimSpace(string(raw)))
		}
		return r, true
	}
	return response{}, false
}

func createProducts(lb *balancer, staff string, n int) ([]string, error) {
	st := &stats{status: map[int]int64{}}
	var ids []string
	for i := range n {
		r, ok := send(context.Background(), lb, st, "POST", "/v1/products", staff,
			map[string]any{"sku": fmt.Sprintf("UPG-%d-%d", time.Now().UnixNano(), i), "name": "Upgrade product", "price_cents": 100 + i, "stock": 1_000_000_000},
			"Idempotency-Key", fmt.Sprintf("product-%d", i))
		if !ok || r.code != http.StatusCreated {
			return nil, fmt.Errorf("create product: %d %v", r.code, r.body)
		}
		ids = append(ids, r.body["id"].(string))
	}
	return ids, nil
}

// client places orders for its customer without pause, pays every third
// order in full and cancels every fourth, each write with its own key.
func client(ctx context.Context, lb *balancer, st *stats, token string, products []string, n int) {
	rng := rand.New(rand.NewPCG(uint64(n), 42))
	for i := 0; ctx.Err() == nil; i++ {
		p1, p2 := products[rng.IntN(len(products))], products[rng.IntN(len(products))]
		lines := []map[string]any{{"product_id": p1, "quantity": 1 + rng.IntN(3)}}
		if p2 != p1 {
			lines = append(lines, map[string]any{"product_id": p2, "quantity": 1})
		}
		key := fmt.Sprintf("c%d-%d-%d", n, i, time.Now().UnixNano())
		r, ok := send(ctx, lb, st, "POST", "/v1/orders", token, map[string]any{"lines": lines}, "Idempotency-Key", "place-"+key)
		if !ok || r.code != http.StatusCreated {
			continue
		}
		id, _ := r.body["id"].(string)
		st.ack(id)
		switch {
		case i%3 == 0:
			total, _ := r.body["total_cents"].(float64)
			send(ctx, lb, st, "POST", "/v1/orders/"+id+"/payments", token, map[string]any{"amount_cents": int64(total)}, "Idempotency-Key", "pay-"+key)
		case i%4 == 1:
			g, ok := send(ctx, lb, st, "GET", "/v1/orders/"+id, token, nil)
			if ok && g.code == http.StatusOK {
				send(ctx, lb, st, "POST", "/v1/orders/"+id+"/cancel", token, nil, "Idempotency-Key", "cancel-"+key, "If-Match", g.etag)
			}
		}
	}
}
