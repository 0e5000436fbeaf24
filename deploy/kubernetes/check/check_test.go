package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func settings(t *testing.T) map[string]bool {
	t.Helper()
	s, err := knownSettings("../../../.env.example")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestManifestsAreValid: every manifest of deploy/kubernetes decodes
// strictly into its Kubernetes type, and the objects agree with each other
// and with the service.
func TestManifestsAreValid(t *testing.T) {
	m, err := load("..")
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(m.check(settings(t))...); err != nil {
		t.Fatal(err)
	}
	if m.count != 6 {
		t.Errorf("%d objects, want 6 (Deployment, Job, Service, PodDisruptionBudget, ConfigMap, Secret)", m.count)
	}
}

// TestCheckRefusesBrokenManifests: each mistake below, made in a copy of the
// manifests, is refused with an error that names it. They are the mistakes
// a plain `yaml.Unmarshal` into the types, or no check at all, lets through.
func TestCheckRefusesBrokenManifests(t *testing.T) {
	for _, c := range []struct {
		name, file, old, new, want string
	}{
		{"a misspelt field", "deployment.yaml", "  replicas: 2", "  replica: 2", `unknown field "replica"`},
		{"a misspelt probe field", "deployment.yaml", "              path: /readyz", "              paht: /readyz", `unknown field`},
		{"a key given twice", "service.yaml", "  type: ClusterIP", "  type: ClusterIP\n  type: NodePort", `already set`},
		{"a value of the wrong type", "pdb.yaml", "  minAvailable: 1", "  minAvailable: [1]", `minAvailable`},
		{"a grace period too short for the stop sequence", "deployment.yaml", "terminationGracePeriodSeconds: 35", "terminationGracePeriodSeconds: 20", "terminationGracePeriodSeconds 20 is shorter"},
		{"a preStop that does not wait SHUTDOWN_DRAIN", "deployment.yaml", "                seconds: 5", "                seconds: 1", "preStop sleeps 1s, want SHUTDOWN_DRAIN (5s)"},
		{"liveness on the database", "deployment.yaml", "              path: /livez\n              port: http\n            periodSeconds: 10", "              path: /readyz\n              port: http\n            periodSeconds: 10", "liveness probe on /readyz, want /livez"},
		{"a setting the service does not read", "configmap.yaml", "  LOG_LEVEL: info", "  LOGLEVEL: info", "LOGLEVEL is no setting"},
		{"a metrics port that is not METRICS_ADDR's", "configmap.yaml", `  METRICS_ADDR: ":9090"`, `  METRICS_ADDR: ":9100"`, "METRICS_ADDR listens on 9100"},
		{"a Service that selects nothing", "service.yaml", "  selector:\n    app.kubernetes.io/name: ordersvc", "  selector:\n    app.kubernetes.io/name: orders", "Service ordersvc: its selector"},
		{"a Secret not in the directory", "deployment.yaml", "                name: ordersvc-secrets", "                name: ordersvc-secret", "reads Secret ordersvc-secret"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			files, _ := filepath.Glob("../*.yaml")
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				s := string(b)
				if filepath.Base(f) == c.file {
					if !strings.Contains(s, c.old) {
						t.Fatalf("%s has no %q to change", c.file, c.old)
					}
					s = strings.Replace(s, c.old, c.new, 1)
				}
				if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			m, err := load(dir)
			if err == nil {
				err = errors.Join(m.check(settings(t))...)
			}
			if err == nil {
				t.Fatalf("refused nothing; want an error with %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v\nwant one with %q", err, c.want)
			}
		})
	}
}
