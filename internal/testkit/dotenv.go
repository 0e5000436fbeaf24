package testkit

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

var dotEnvOnce sync.Once

// loadDotEnv reads the test settings from the .env file beside go.mod, the
// file `make images` writes and make and docker compose read, so that
// `go test ./...` run without make finds the same database settings:
// TEST_DATABASE_URL, TEST_POSTGRES_IMAGE, TEST_PGBOUNCER, TEST_PARALLEL and
// testcontainers' TESTCONTAINERS_* settings. Only those: the service's own
// settings (DATABASE_URL, …) are never taken into the tests. A variable set
// in the environment wins, as with make.
func loadDotEnv() {
	dotEnvOnce.Do(func() {
		wd, err := os.Getwd()
		if err != nil {
			return
		}
		for name, value := range dotEnvTestSettings(findDotEnv(wd)) {
			if _, set := os.LookupEnv(name); !set {
				_ = os.Setenv(name, value)
			}
		}
	})
}

// dotEnvTestSettings reads the test settings of a .env file (NAME=value
// lines, optionally quoted or after `export `); none when path is "".
func dotEnvTestSettings(path string) map[string]string {
	out := map[string]string{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimPrefix(strings.TrimSpace(sc.Text()), "export ")
		name, value, ok := strings.Cut(line, "=")
		if !ok || !(strings.HasPrefix(name, "TEST_") || strings.HasPrefix(name, "TESTCONTAINERS_")) {
			continue
		}
		if len(value) >= 2 && (value[0] == '"' || value[0] == '\'') && value[len(value)-1] == value[0] {
			value = value[1 : len(value)-1]
		}
		out[name] = value
	}
	return out
}

// findDotEnv returns the .env beside the go.mod that holds dir (a test runs
// in its package's directory), or "".
func findDotEnv(dir string) string {
	root := moduleRoot(dir)
	if root == "" {
		return ""
	}
	if _, err := os.Stat(filepath.Join(root, ".env")); err != nil {
		return ""
	}
	return filepath.Join(root, ".env")
}

// moduleRoot returns the directory of the go.mod that holds dir, or "".
func moduleRoot(dir string) string {
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
