package testkit

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"testing"
)

var (
	binariesMu  sync.Mutex
	binaries    = map[string]*builtBinary{}
	binariesDir string
)

type builtBinary struct {
	once sync.Once
	path string
	out  []byte
	err  error
}

// Binary builds the command of package pkg (an import path) once per test
// binary and returns the executable's path; tests that run the service out
// of process (signals, kills, several replicas) share it instead of each
// linking their own copy at the same time. Run removes it when the tests end.
func Binary(t testing.TB, pkg string) string {
	t.Helper()
	binariesMu.Lock()
	b, ok := binaries[pkg]
	if !ok {
		b = &builtBinary{}
		binaries[pkg] = b
	}
	if binariesDir == "" {
		dir, err := os.MkdirTemp("", "ordersvc-test-bin-")
		if err != nil {
			binariesMu.Unlock()
			t.Fatalf("build %s: %v", pkg, err)
		}
		binariesDir = dir
	}
	dir := binariesDir
	binariesMu.Unlock()
	b.once.Do(func() {
		b.path = filepath.Join(dir, path.Base(pkg))
		b.out, b.err = exec.Command("go", "build", "-o", b.path, pkg).CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, b.err, b.out)
	}
	return b.path
}

// removeBinaries deletes what Binary built.
func removeBinaries() {
	binariesMu.Lock()
	defer binariesMu.Unlock()
	if binariesDir != "" {
		_ = os.RemoveAll(binariesDir)
	}
}
