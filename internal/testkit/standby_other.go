//go:build !linux

package testkit

import (
	"errors"
	"os/exec"
)

func asPostgresOwner(*exec.Cmd, string) error {
	return errors.New("a standby made by the test kit is supported on Linux only; set TEST_READ_DATABASE_URL")
}
