package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// stubs writes executables named docker and curl into a directory that
// exit with the given codes, and returns the directory.
func stubs(t *testing.T, docker, curl int) string {
	t.Helper()
	dir := t.TempDir()
	for name, code := range map[string]int{"docker": docker, "curl": curl} {
		script := "#!/bin/sh\nexit " + string(rune('0'+code)) + "\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// needImages runs need-images.sh with docker and curl stubbed.
func needImages(t *testing.T, docker, curl int, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"need-images.sh"}, args...)...)
	cmd.Env = []string{"PATH=" + stubs(t, docker, curl) + ":/usr/bin:/bin", "GO_IMAGE=local/golang:1"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestMakeUpWithoutRegistrySaysRunMakeImages: with an image missing and no
// registry answering, `make up`'s check fails with one message naming the
// images and `make images` (PROFILE=scale for the profile's), instead of
// compose's raw lookup error; with the images here, or a registry that
// answers, it lets compose go on.
func TestMakeUpWithoutRegistrySaysRunMakeImages(t *testing.T) {
	t.Parallel()
	out, err := needImages(t, 1, 7)
	if err == nil || !strings.Contains(out, "run `make images` first") || !strings.Contains(out, "local/golang:1") {
		t.Errorf("no image, no registry: %v %q, want exit 1 naming the images and `make images`", err, out)
	}
	out, err = needImages(t, 1, 7, "scale")
	if err == nil || !strings.Contains(out, "run `make images PROFILE=scale` first") || !strings.Contains(out, "haproxy") {
		t.Errorf("profile scale: %v %q", err, out)
	}
	if out, err := needImages(t, 0, 7); err != nil {
		t.Errorf("images present, no registry: %v %q, want exit 0", err, out)
	}
	if out, err := needImages(t, 1, 0); err != nil {
		t.Errorf("images missing, registry answers: %v %q, want exit 0 (compose pulls)", err, out)
	}
}
