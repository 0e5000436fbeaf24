package postgres

import (
	"errors"
	"strings"
	"testing"
)

// TestContractRefusalNamesTheUpgradeStop: when `api migrate up` stops
// before a contract migration because older binaries are connected, it
// tells the operator to roll the replicas to this release, unless this
// release has expand migrations after the contract one: its replicas need
// them to turn ready and they apply only after the contract, so rolling
// would stall (the rollout never completes and the contract never runs).
// The answer then names the upgrade stop: the release that added the
// contract migration comes first (docs/migrations.md).
func TestContractRefusalNamesTheUpgradeStop(t *testing.T) {
	t.Parallel()
	older := map[string]int64{"ordersvc serve schema=6": 2}
	cases := []struct {
		name     string
		versions []int64
		want     []string
		notWant  []string
	}{
		{"the contract is the last migration", []int64{6, 7, 8},
			[]string{"00008_transition_end.sql", "roll every replica to this release", "2 connected as \"ordersvc serve schema=6\""},
			[]string{"upgrade stop"}},
		{"expand migrations follow the contract", []int64{6, 7, 8, 9, 10},
			[]string{"00008_transition_end.sql", "expand migrations 00009, 00010", "upgrade stop", "stop every older replica"},
			[]string{"roll every replica to this release"}},
	}
	for _, c := range cases {
		s := Schema{versions: c.versions, contract: map[int64]bool{8: true}}
		err := contractRefused(s, "00008_transition_end.sql", 8, older)
		if !errors.Is(err, ErrOlderBinaries) {
			t.Errorf("%s: %v is not ErrOlderBinaries", c.name, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.name, err, w)
			}
		}
		for _, w := range c.notWant {
			if strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q says %q", c.name, err, w)
			}
		}
	}
}
