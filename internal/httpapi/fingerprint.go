package httpapi

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
)

// A fingerprint (EXT.IDEMPOTENCY.KEY.001) is the SHA-256 of a canonical form
// of the request: the operation's name, the form's version and the mapped
// command, written out under field names frozen here. It never depends on
// Go's struct field names, so renaming a field or splitting a command
// leaves stored fingerprints valid: a client whose response was lost
// retries across a deploy and replays, never 422 idempotency_key_reused.
// Credentials and the key are not part of it. Ids are in their one
// canonical spelling (uuid's lower case with dashes), so /v1/orders/ABC… and
// /v1/orders/abc… are one request; If-Match versions are a sorted set
// (RFC 9110 gives the list set semantics), so "v1", "v5" and "v5", "v1" are
// one request. The operation name stands for the route (method and
// pattern): the key's scope already includes it.
//
// Adding an operation: one entry in fingerprintForms, and one golden line
// in TestFingerprintGolden (the test fails until it is there).
//
// Changing a form (a field added to the request, say): never edit a form in
// place. Add the new form, version+1, in front of the old one; the old one
// stays listed for at least one IDEMPOTENCY_TTL after the release that ships
// the new one, so that a record written before the deploy still replays
// (app.Key.Previous), and is removed in a later release, before the form
// changes again. TestFingerprintGolden pins the current form of every
// operation; its golden line changes with the version, deliberately.
var fingerprintForms = map[string][]fingerprintForm{
	"createProduct": {formOf(1, func(c app.CreateProductCommand) canonical {
		return canonical{"sku": c.SKU, "name": c.Name, "price_cents": c.PriceCents, "stock": c.Stock}
	})},
	"updateProduct": {formOf(1, func(c app.UpdateProductCommand) canonical {
		return canonical{"product_id": id(c.ID), "if_match": versionSet(c.Expected), "name": c.Name, "price_cents": c.PriceCents}
	})},
	"adjustStock": {formOf(1, func(c app.AdjustStockCommand) canonical {
		return canonical{"product_id": id(c.ProductID), "delta": c.Delta, "reason": c.Reason}
	})},
	"placeOrder": {formOf(1, func(c app.PlaceOrderCommand) canonical {
		lines := make([]canonical, len(c.Lines)) // in the order sent: it is the order's line order
		for i, l := range c.Lines {
			lines[i] = canonical{"product_id": id(l.ProductID), "quantity": int64(l.Quantity)}
		}
		return canonical{"lines": lines}
	})},
	"cancelOrder": {formOf(1, func(c app.CancelOrderCommand) canonical {
		return canonical{"order_id": id(c.ID), "if_match": versionSet(c.Expected)}
	})},
	"shipOrder": {formOf(1, func(c app.ShipOrderCommand) canonical {
		return canonical{"order_id": id(c.ID), "if_match": versionSet(c.Expected)}
	})},
	"recordPayment": {formOf(1, func(c app.RecordPaymentCommand) canonical {
		return canonical{"order_id": id(c.OrderID), "amount_cents": int64(c.Amount)}
	})},
	"recordRefund": {formOf(1, func(c app.RecordRefundCommand) canonical {
		return canonical{"order_id": id(c.OrderID), "amount_cents": int64(c.Refund.Amount), "reason": c.Refund.Reason}
	})},
	"deactivateActor": {formOf(1, func(c app.DeactivateActorCommand) canonical {
		return canonical{"actor_id": id(c.ID)}
	})},
}

// canonical is one form's content: frozen member names and values that
// are strings, integers, optional ones (nil pointers are null), lists of
// these, or canonical values.
// encoding/json writes a map's members sorted by name, so the bytes depend
// on the content only.
type canonical map[string]any

// fingerprintForm is one version of an operation's canonical form.
type fingerprintForm struct {
	version int
	of      func(command any) (canonical, error)
}

// formOf is a form for the commands of type C.
func formOf[C any](version int, of func(C) canonical) fingerprintForm {
	return fingerprintForm{version: version, of: func(command any) (canonical, error) {
		c, ok := command.(C)
		if !ok {
			var want C
			return nil, fmt.Errorf("fingerprint form v%d takes %T, not %T", version, want, command)
		}
		return of(c), nil
	}}
}

// id is an id's canonical spelling.
func id(v uuid.UUID) string { return v.String() }

// versionSet is an If-Match list as a set: sorted, each version once.
func versionSet(vs []domain.Version) []int64 {
	out := make([]int64, 0, len(vs))
	for _, v := range vs {
		out = append(out, int64(v))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// fingerprints returns the fingerprint of command under the operation's
// current form, and under its previous form while that is still listed
// (zero when it is not). An operation lists at most two forms.
func fingerprints(forms map[string][]fingerprintForm, operation string, command any) (current, previous [32]byte, err error) {
	fs := forms[operation]
	if len(fs) == 0 || len(fs) > 2 {
		return current, previous, fmt.Errorf("operation %q has %d fingerprint forms, want the current one and at most its previous one (fingerprint.go)", operation, len(fs))
	}
	if current, err = fs[0].sum(operation, command); err != nil || len(fs) == 1 {
		return current, previous, err
	}
	previous, err = fs[1].sum(operation, command)
	return current, previous, err
}

// sum hashes the form's canonical bytes.
func (f fingerprintForm) sum(operation string, command any) ([32]byte, error) {
	b, err := f.canonicalBytes(operation, command)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(b), nil
}

// canonicalBytes is what is hashed: {"form":{"operation","version"},"input":…}.
func (f fingerprintForm) canonicalBytes(operation string, command any) ([]byte, error) {
	input, err := f.of(command)
	if err != nil {
		return nil, err
	}
	return json.Marshal(canonical{"form": canonical{"operation": operation, "version": f.version}, "input": input})
}
