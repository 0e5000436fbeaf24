package httpapi

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
)

// The hand-written encoders must produce json.Marshal's bytes exactly:
// stored fingerprints and replayed bodies depend on them.

func randomTime(r *rand.Rand) time.Time {
	t := time.Unix(r.Int64N(4_000_000_000), r.Int64N(1_000_000_000)).UTC()
	switch r.IntN(4) {
	case 0:
		t = t.Truncate(time.Second)
	case 1:
		t = t.Truncate(time.Millisecond)
	case 2:
		t = t.Truncate(time.Microsecond)
	}
	return t
}

var awkward = []string{"", "plain", `quote"d`, `back\slash`, "tab\there", "new\nline", "<b>&amp;</b>",
	"caf\u00e9", "\u2028\u2029", "emoji \U0001F600", "bad \xff utf8", "\x00\x01\x1f", "del\x7f", "\b\f"}

func randomString(r *rand.Rand) string {
	if r.IntN(2) == 0 {
		return awkward[r.IntN(len(awkward))]
	}
	b := make([]byte, r.IntN(20))
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	if r.IntN(2) == 0 {
		return string(bytes.ToValidUTF8(b, nil))
	}
	return string(b)
}

func randomUUID(r *rand.Rand) uuid.UUID {
	var u uuid.UUID
	for i := range u {
		u[i] = byte(r.IntN(256))
	}
	return u
}

func TestOrderJSONMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		o := orderJSON{ID: randomUUID(r), CustomerID: randomUUID(r),
			Status:     []string{"placed", "shipped", "cancelled"}[r.IntN(3)],
			TotalCents: r.Int64N(1 << 40), PaidCents: r.Int64N(1 << 40),
			CreatedAt: randomTime(r), UpdatedAt: randomTime(r)}
		if r.IntN(10) > 0 {
			o.Lines = make([]orderLineJSON, r.IntN(4))
			for i := range o.Lines {
				o.Lines[i] = orderLineJSON{ProductID: randomUUID(r), Quantity: r.Int32N(1001), UnitPriceCents: r.Int64N(1 << 40)}
			}
		}
		want, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.appendJSON(nil); !bytes.Equal(got, want) {
			t.Fatalf("order:\n got %s\nwant %s", got, want)
		}
	}
}

func TestProductJSONMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		p := productJSON{ID: randomUUID(r), SKU: randomString(r), Name: randomString(r),
			PriceCents: r.Int64N(1 << 40), CreatedAt: randomTime(r), UpdatedAt: randomTime(r)}
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.appendJSON(nil); !bytes.Equal(got, want) {
			t.Fatalf("product (valid utf8 %v):\n got %q\nwant %q", utf8.ValidString(p.Name), got, want)
		}
	}
}

func TestPlacementCanonicalFormMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		var cmd app.PlaceOrderCommand
		if r.IntN(10) > 0 {
			cmd.Lines = make([]domain.LineRequest, r.IntN(51))
			for i := range cmd.Lines {
				cmd.Lines[i] = domain.LineRequest{ProductID: randomUUID(r), Quantity: domain.Quantity(r.Int32N(1001))}
			}
		}
		want, err := json.Marshal(cmd)
		if err != nil {
			t.Fatal(err)
		}
		got, err := canonical(cmd)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("canonical:\n got %s %v\nwant %s", got, err, want)
		}
	}
	// Every other command still goes through encoding/json.
	other := app.CancelOrderCommand{ID: randomUUID(r), Expected: []domain.Version{3}}
	want, _ := json.Marshal(other)
	if got, _ := canonical(other); !bytes.Equal(got, want) {
		t.Fatalf("transition: %s vs %s", got, want)
	}
}
