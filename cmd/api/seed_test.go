package main

import (
	"encoding/json"
	"testing"

	"github.com/ordersvc/ordersvc/internal/testkit"
)

// TestSeedPrintsWhatItMade: `api seed` prints its three actors and its four
// demo products, marked created; run again, new actors and the same four
// products, marked kept, with their ids; never another product of the
// database.
func TestSeedPrintsWhatItMade(t *testing.T) {
	t.Parallel()
	e := testkit.New(t)
	other := e.NewProduct(testkit.ProductSpec{PriceCents: 100, Stock: 1})
	getenv := env("DATABASE_URL", e.URL)
	type seeded struct {
		Actors []struct {
			ActorID string `json:"actor_id"`
			Token   string `json:"token"`
		} `json:"actors"`
		Products []struct {
			ID      string `json:"id"`
			SKU     string `json:"sku"`
			Created bool   `json:"created"`
		} `json:"products"`
	}
	var runs [2]seeded
	for i := range runs {
		out, err := runCmd(t, getenv, "seed")
		if err != nil {
			t.Fatalf("seed run %d: %v", i+1, err)
		}
		if err := json.Unmarshal([]byte(out), &runs[i]); err != nil {
			t.Fatalf("seed run %d printed %q: %v", i+1, out, err)
		}
		if len(runs[i].Actors) != 3 || len(runs[i].Products) != 4 {
			t.Fatalf("seed run %d printed %d actors and %d products, want 3 and 4:\n%s", i+1, len(runs[i].Actors), len(runs[i].Products), out)
		}
		for _, p := range runs[i].Products {
			if p.ID == other {
				t.Errorf("seed run %d lists %s, a product it did not make", i+1, other)
			}
			if p.Created != (i == 0) {
				t.Errorf("seed run %d: %s created=%v, want %v", i+1, p.SKU, p.Created, i == 0)
			}
		}
	}
	ids := map[string]string{}
	for _, p := range runs[0].Products {
		ids[p.SKU] = p.ID
	}
	for _, p := range runs[1].Products {
		if ids[p.SKU] != p.ID {
			t.Errorf("the second seed lists %s as %s, the first made %s", p.SKU, p.ID, ids[p.SKU])
		}
	}
	if runs[0].Actors[0].ActorID == runs[1].Actors[0].ActorID {
		t.Error("the second seed reused an actor: a token cannot be shown twice")
	}
}
