//go:build !linux

package testkit

import (
	"errors"
	"os/exec"
)

func asPostgresOwner(*exec.Cmd, string) error {
	return errors.New("a standby made by the test kit is supported on Linux only; set TEST_READ_DATABASE_URL")
}

// processRuns: elsewhere no slot is taken for abandoned (the standby is
// Linux only).
func processRuns(int) bool { return true }
