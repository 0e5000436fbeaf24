package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
)

// asPostgresUser makes cmd run as the postgres user when the tests run as
// root (PgBouncer refuses root), owning dir, and die with the test binary.
func asPostgresUser(cmd *exec.Cmd, dir string) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("run pgbouncer as postgres: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, f := range []string{dir, dir + "/pgbouncer.ini", dir + "/userlist.txt"} {
		if err := os.Chown(f, uid, gid); err != nil {
			return err
		}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	return nil
}
