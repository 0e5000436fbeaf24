//go:build !linux

package testkit

import (
	"fmt"
	"os/exec"
)

// asPostgres: the programs the kit starts itself (PgBouncer, the standby)
// run on Linux only.
func asPostgres(_ *exec.Cmd, _ string, program string) error {
	return fmt.Errorf("%s started by the test kit is supported on Linux only", program)
}

// processRuns: elsewhere no slot is taken for abandoned (the standby is
// Linux only).
func processRuns(int) bool { return true }
