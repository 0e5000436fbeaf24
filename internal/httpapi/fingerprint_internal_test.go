package httpapi

import (
	"cmp"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
)

// goldenCommands are the hand-written golden commands of the operations
// pinned before fillCommand (fingerprint_fill_internal_test.go) made them:
// a frozen list. Their lines, version 0 ones computed by an older release
// included, pin these very commands, so an entry never changes, and no
// operation is added: every keyed operation not listed here gets its
// golden command from fillCommand, and adding an operation edits no test
// file. (The one exception: a field of a filled command renamed in Go
// changes the filled values, and the operation is then listed with the
// command as it was filled, to keep its lines; see fillCommand.) An entry
// goes when its operation does (the test says so). A field added to one
// of these commands is set in its entry
// (TestFingerprintGoldenCommandsSetEveryField): the forms pinned before do
// not read it, so their lines keep their values.
var goldenCommands = func() map[string]any {
	p := uuid.MustParse("0190f4c4-7c7e-7b3a-9f38-3c1e2d9a0001")
	o := uuid.MustParse("0190f4c4-7c7e-7b3a-9f38-3c1e2d9a0002")
	q := uuid.MustParse("0190f4c4-7c7e-7b3a-9f38-3c1e2d9a0003")
	name, price := "Mug", int64(1500)
	return map[string]any{
		"createProduct":   app.CreateProductCommand{SKU: "MUG-1", Name: "Mug", PriceCents: 1200, Stock: 10},
		"updateProduct":   app.UpdateProductCommand{ID: p, Expected: []domain.Version{5, 1}, Name: &name, PriceCents: &price},
		"adjustStock":     app.AdjustStockCommand{ProductID: p, Delta: -3, Reason: "breakage"},
		"placeOrder":      app.PlaceOrderCommand{Lines: []domain.LineRequest{{ProductID: p, Quantity: 2}, {ProductID: q, Quantity: 1}}},
		"cancelOrder":     app.CancelOrderCommand{ID: o, Expected: []domain.Version{2}},
		"shipOrder":       app.ShipOrderCommand{ID: o, Expected: []domain.Version{2}},
		"recordPayment":   app.RecordPaymentCommand{OrderID: o, Amount: 500},
		"deactivateActor": app.DeactivateActorCommand{ID: q},
	}
}()

// goldenCommand is the command an operation's golden lines pin: its entry
// in goldenCommands, or else fillCommand's for the type its forms take.
func goldenCommand(op string) (any, error) {
	if cmd, ok := goldenCommands[op]; ok {
		return cmd, nil
	}
	fs := fingerprintForms[op]
	if len(fs) == 0 {
		return nil, fmt.Errorf("no fingerprint form (operations.go)")
	}
	return fillCommand(fs[0].command)
}

// goldenFile pins the fingerprint of each operation's golden command under
// each of its listed forms: one line per operation and form version
// ("createProduct 1 <sha-256>"). A pinned line never changes: a changed
// line means a stored fingerprint would no longer match its request, and
// every client retrying across the deploy would get 422. A form changes
// with a new version, which is a new line (see fingerprint.go). Version 0
// lines are the fingerprints the release before canonical forms (35cbd62,
// where a fingerprint was the route and the command's Go JSON) stored,
// computed by that release's own code.
const goldenFile = "testdata/fingerprints.golden"

// update: go test ./internal/httpapi/ -run TestFingerprintGolden -update
// rewrites goldenFile with a line for every listed form. It adds the
// missing lines and drops those of forms no longer listed; a pinned line
// keeps its value, so a changed fingerprint still fails.
var update = flag.Bool("update", false, "write the missing lines of "+goldenFile+" (pinned lines are kept)")

// goldenKey is a line's operation and form version.
type goldenKey struct {
	op      string
	version int
}

// readGolden reads goldenFile: blank lines and lines starting with # are
// comments.
func readGolden(t *testing.T) (lines map[goldenKey]string, header []string) {
	t.Helper()
	b, err := os.ReadFile(goldenFile)
	if err != nil && !(*update && errors.Is(err, fs.ErrNotExist)) {
		t.Fatalf("%v: go test ./internal/httpapi/ -run TestFingerprintGolden -update writes it", err)
	}
	lines = make(map[goldenKey]string)
	for i, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			if strings.HasPrefix(l, "#") && len(lines) == 0 {
				header = append(header, l)
			}
			continue
		}
		f := strings.Fields(l)
		v, err := strconv.Atoi(f[min(1, len(f)-1)])
		k := goldenKey{f[0], v}
		if _, dup := lines[k]; len(f) != 3 || err != nil || dup {
			t.Fatalf("%s:%d: %q is not a line \"operation version sha-256\", or repeats one", goldenFile, i+1, l)
		}
		lines[k] = f[2]
	}
	return lines, header
}

// TestFingerprintGolden: every keyed operation has a canonical form, a
// golden command (goldenCommand: hand-written or filled) and, for each of
// its listed forms, a pinned fingerprint in goldenFile, and the
// fingerprint is still the pinned one. A line for a form no longer listed
// fails too (-update drops it, when the form was removed on purpose), and
// so does an entry of goldenCommands whose operation is gone.
func TestFingerprintGolden(t *testing.T) {
	t.Parallel()
	ops := slices.Sorted(maps.Keys(fingerprintForms))
	if k := slices.Sorted(slices.Values(keyedOperations)); !slices.Equal(ops, k) {
		t.Fatalf("keyed operations %v, operations with a fingerprint form %v: a keyed operation needs its form (fingerprint.go)", k, ops)
	}
	checkGoldenCommandsAreKeyed(t)
	golden, header := readGolden(t)
	listed := make(map[goldenKey]string)
	for _, op := range ops {
		cmd, err := goldenCommand(op)
		if err != nil {
			t.Errorf("%s: golden command: %v", op, err)
			continue
		}
		for _, f := range fingerprintForms[op] {
			sum, err := f.sum(op, cmd)
			if err != nil {
				t.Errorf("%s v%d: %v", op, f.version, err)
				continue
			}
			k, got := goldenKey{op, f.version}, hex.EncodeToString(sum[:])
			listed[k] = got
			b, _ := f.canonicalBytes(op, cmd)
			switch pinned, ok := golden[k]; {
			case !ok && *update:
				t.Logf("%s v%d: new line %s", op, f.version, got)
			case !ok:
				t.Errorf("%s v%d: no line in %s; a new operation or form version adds its line: "+
					"go test ./internal/httpapi/ -run TestFingerprintGolden -update, and commit it (only new lines may appear in the diff); canonical form:\n%s",
					op, f.version, goldenFile, b)
			case got != pinned:
				listed[k] = pinned
				t.Errorf("%s v%d: fingerprint %s, pinned %s: never edit a form in place, add its next version (fingerprint.go); canonical form:\n%s",
					op, f.version, got, pinned, b)
			}
		}
	}
	for k := range golden {
		if _, ok := listed[k]; !ok && !*update {
			t.Errorf("%s v%d: pinned in %s, but no such form is listed: a form is removed on purpose only (fingerprint.go), then -update drops its line", k.op, k.version, goldenFile)
		}
	}
	if *update {
		writeGolden(t, header, listed)
	}
}

// checkGoldenCommandsAreKeyed: every entry of goldenCommands is a keyed
// operation's; one whose operation is gone is removed.
func checkGoldenCommandsAreKeyed(t *testing.T) {
	t.Helper()
	for op := range goldenCommands {
		if _, ok := fingerprintForms[op]; !ok {
			t.Errorf("goldenCommands lists %s, which is no keyed operation: remove its entry", op)
		}
	}
}

// writeGolden writes goldenFile: its header, then the lines sorted by
// operation and version.
func writeGolden(t *testing.T, header []string, lines map[goldenKey]string) {
	t.Helper()
	keys := slices.SortedFunc(maps.Keys(lines), func(a, b goldenKey) int {
		return cmp.Or(strings.Compare(a.op, b.op), cmp.Compare(a.version, b.version))
	})
	var b strings.Builder
	for _, h := range header {
		b.WriteString(h + "\n")
	}
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %d %s\n", k.op, k.version, lines[k])
	}
	if err := os.WriteFile(goldenFile, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFingerprintOfThePreviousReleaseIsStillAccepted: for every operation
// the release before canonical forms had (its version 0 line in
// goldenFile), the previous form gives the very fingerprint that release
// stored, so a retry across the upgrade matches its record
// (app.Key.Previous) and replays instead of answering 422. The naive
// variant, the canonical form alone, matches none.
func TestFingerprintOfThePreviousReleaseIsStillAccepted(t *testing.T) {
	t.Parallel()
	golden, _ := readGolden(t)
	n := 0
	for k, want := range golden {
		if k.version != 0 {
			continue
		}
		n++
		op := k.op
		cmd, err := goldenCommand(op)
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		cur, previous, err := fingerprints(fingerprintForms, op, cmd)
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		if got := hex.EncodeToString(previous[:]); got != want {
			b, _ := fingerprintForms[op][len(fingerprintForms[op])-1].canonicalBytes(op, cmd)
			t.Errorf("%s: previous fingerprint %s, the previous release stored %s; hashed:\n%q", op, got, want, b)
		}
		if hex.EncodeToString(cur[:]) == want {
			t.Errorf("%s: the canonical form equals the previous release's: the test cannot tell the forms apart", op)
		}
	}
	if n == 0 {
		t.Errorf("no version 0 line in %s: the previous release's fingerprints are not pinned", goldenFile)
	}
}

// TestFingerprintIfMatchIsASet: an If-Match list is a set (RFC 9110
// §13.1.1): the order of its tags and a repeated tag do not change the
// fingerprint; another set does.
func TestFingerprintIfMatchIsASet(t *testing.T) {
	t.Parallel()
	o := uuid.MustParse("0190f4c4-7c7e-7b3a-9f38-3c1e2d9a0002")
	fp := func(header ...string) [32]byte {
		sum, _, err := fingerprints(fingerprintForms, "cancelOrder", app.CancelOrderCommand{ID: o, Expected: parseIfMatch(header).versions})
		if err != nil {
			t.Fatal(err)
		}
		return sum
	}
	want := fp(`"v1", "v5"`)
	for _, h := range [][]string{{`"v5", "v1"`}, {`"v5"`, `"v1"`}, {`"v1", "v5", "v1"`}, {`"v5",W/"v7", "v1"`}} {
		if fp(h...) != want {
			t.Errorf("If-Match %q: fingerprint differs from \"v1\", \"v5\"", h)
		}
	}
	if fp(`"v1", "v6"`) == want {
		t.Error(`If-Match "v1", "v6" has the fingerprint of "v1", "v5"`)
	}
}

// TestFingerprintFormVersions: a form moved to its next version changes
// the current fingerprint; the previous form, still listed, gives the
// fingerprint a record written before the change holds.
func TestFingerprintFormVersions(t *testing.T) {
	t.Parallel()
	cmd := goldenCommands["recordPayment"]
	v1 := fingerprintForms["recordPayment"]
	v2 := formOf(2, func(c app.RecordPaymentCommand) canonical {
		return canonical{"order": id(c.OrderID), "amount": map[string]any{"cents": int64(c.Amount), "currency": "EUR"}}
	})
	old, _, _ := fingerprints(fingerprintForms, "recordPayment", cmd)
	cur, previous, err := fingerprints(map[string][]fingerprintForm{"recordPayment": {v2, v1[0]}}, "recordPayment", cmd)
	if err != nil {
		t.Fatal(err)
	}
	if cur == old || previous != old {
		t.Errorf("v2 current %x, previous %x; want a new current and v1's %x as the previous", cur, previous, old)
	}
	if _, _, err := fingerprints(map[string][]fingerprintForm{"recordPayment": {v2, v1[0], v1[0]}}, "recordPayment", cmd); err == nil {
		t.Error("three forms of one operation were accepted")
	}
	if _, _, err := fingerprints(fingerprintForms, "refundOrder", cmd); err == nil {
		t.Error("an operation without a form got a fingerprint")
	}
}
