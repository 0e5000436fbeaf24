package httpapi

import (
	"encoding/hex"
	"maps"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
)

// goldenCommands is one command per keyed operation, fixed forever.
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
		"recordRefund":    app.RecordRefundCommand{OrderID: o, Refund: domain.Refund{Amount: 300, Reason: "cancelled: out of stock"}},
		"deactivateActor": app.DeactivateActorCommand{ID: q},
	}
}()

// golden pins the current fingerprint of each operation's golden command.
// A line changes only with a new form version (see fingerprint.go): a
// failure here means a stored fingerprint would no longer match its
// request, and every client retrying across the deploy would get 422.
var golden = map[string]string{
	"createProduct":   "9441a29d50dcaebaf8d9bb925fb1eba819e903d06b2472676ae247f51c7a62d9",
	"updateProduct":   "58586e83a53881855d8e0fb809e9c6fdbeac0de37f202e61c5f8b86344ff0000",
	"adjustStock":     "911606602bae29f971ecaf1869773da20e328980b377b067ce15ce01651ebe68",
	"placeOrder":      "21a466cdf3e0abc70ee1d5cb011ba038e4ce88b951effa538e1d25455640e0a2",
	"cancelOrder":     "f520ba3f93cfbc42d2d268cdbf0abccec84c3b20140c560fd95e8a2794a05730",
	"shipOrder":       "d20689f41e451a077e22ccd73fb24fc5858120495d9040e7df7efc9998459400",
	"recordPayment":   "ae078a5956432b0d0063b36bca5fc3f75b87008a93230b35b1e34cdf05466dd7",
	"recordRefund":    "31b087d82ad800281a2a2054805cff87235191097478f8959efceb64d1490240",
	"deactivateActor": "b8188c26104b516422aa8d705b0810e454b5530367c967900e98166c343b73d3",
}

// TestFingerprintGolden: every keyed operation has a canonical form, a
// golden command and a pinned fingerprint, and the fingerprint is still
// the pinned one.
func TestFingerprintGolden(t *testing.T) {
	t.Parallel()
	ops := slices.Sorted(maps.Keys(fingerprintForms))
	if g := slices.Sorted(maps.Keys(golden)); !slices.Equal(ops, g) {
		t.Fatalf("operations with a form %v, with a golden fingerprint %v: add the golden line with the form", ops, g)
	}
	if k := slices.Sorted(slices.Values(keyedOperations)); !slices.Equal(ops, k) {
		t.Fatalf("keyed operations %v, operations with a fingerprint form %v: a keyed operation needs its form (fingerprint.go)", k, ops)
	}
	for _, op := range ops {
		cmd, ok := goldenCommands[op]
		if !ok {
			t.Errorf("%s: no golden command", op)
			continue
		}
		sum, _, err := fingerprints(fingerprintForms, op, cmd)
		if err != nil {
			t.Errorf("%s: %v", op, err)
			continue
		}
		b, _ := fingerprintForms[op][0].canonicalBytes(op, cmd)
		if got := hex.EncodeToString(sum[:]); got != golden[op] {
			t.Errorf("%s: fingerprint %s, pinned %s; canonical form:\n%s", op, got, golden[op], b)
		}
	}
}

// goldenBeforeForms is the fingerprint the release before canonical forms
// (35cbd62, where a fingerprint was the route and the command's Go JSON)
// gave each golden command, computed by that release's own code. A
// request it recorded must still replay when retried after the upgrade.
var goldenBeforeForms = map[string]string{
	"createProduct":   "aaed6601330588e4ff24f35296f17c25bad07528d2b4521d32c5e01b8f9bba5e",
	"updateProduct":   "8c48d79b156b0b3492bb01dbd1489be05b23aca36e8bcb411576457eeebc71e7",
	"adjustStock":     "e7a119bdcc06790efeb21a6051b29ac44789b9f6593d7b90c088916606cb4114",
	"placeOrder":      "04df681f82caf70501bb04c0915eab244770f0614e93ab3133b62fba627de266",
	"cancelOrder":     "20639d989eaf1e7e82eb780dc30f900e1e6b45f6db15ec20258be53c127c358c",
	"shipOrder":       "04c8f04193cc706a600d2b956adee958223edee46736526ec647ad39d29de7d2",
	"recordPayment":   "74ce2c7b0c91d10f68df193da658b1385f0f8bbd4d92555d9ec5732e1df198fc",
	"deactivateActor": "e602ee16b2be177df2e4e6210499b96111eecd34fe7ab50152b721e5fc3cb247",
}

// TestFingerprintOfThePreviousReleaseIsStillAccepted: for every operation
// the release before canonical forms had, the previous form (version 0)
// gives the very fingerprint that release stored, so a retry across the
// upgrade matches its record (app.Key.Previous) and replays instead of
// answering 422. The naive variant, the canonical form alone, matches none.
func TestFingerprintOfThePreviousReleaseIsStillAccepted(t *testing.T) {
	t.Parallel()
	for op, want := range goldenBeforeForms {
		cur, previous, err := fingerprints(fingerprintForms, op, goldenCommands[op])
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		if got := hex.EncodeToString(previous[:]); got != want {
			b, _ := fingerprintForms[op][len(fingerprintForms[op])-1].canonicalBytes(op, goldenCommands[op])
			t.Errorf("%s: previous fingerprint %s, the previous release stored %s; hashed:\n%q", op, got, want, b)
		}
		if hex.EncodeToString(cur[:]) == want {
			t.Errorf("%s: the canonical form equals the previous release's: the test cannot tell the forms apart", op)
		}
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
