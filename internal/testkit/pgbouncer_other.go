//go:build !linux

package testkit

import (
	"errors"
	"os/exec"
)

func asPostgresUser(*exec.Cmd, string) error {
	return errors.New("TEST_PGBOUNCER=1 is supported on Linux only")
}
