// Command check reads the Kubernetes manifests of deploy/kubernetes and
// refuses any that the Kubernetes API would not take as written: each
// document is decoded strictly into its type from k8s.io/api (an unknown or
// misspelt field, a duplicate key, a value of the wrong type is an error),
// and the objects are then checked against each other and against the
// service: the probes and ports, the Secret and ConfigMap the pods read, the
// selectors, every setting being one the service reads, and the stop
// sequence fitting in the grace period.
//
//	cd deploy/kubernetes/check && go run . ..
//
// It is a module of its own so that the service's go.mod carries no
// Kubernetes dependency. It checks the manifests, not a cluster: they have
// not been applied to a real one in CI.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

func main() {
	dir := ".."
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	settings, err := knownSettings(filepath.Join(dir, "..", "..", ".env.example"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "check:", err)
		os.Exit(2)
	}
	m, err := load(dir)
	if err == nil {
		err = errors.Join(m.check(settings)...)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("check: %d objects in %s decode strictly and agree with each other and the service\n", m.count, dir)
}

// manifests are the objects of the directory, by kind.
type manifests struct {
	count       int
	deployments []*appsv1.Deployment
	jobs        []*batchv1.Job
	services    []*corev1.Service
	pdbs        []*policyv1.PodDisruptionBudget
	configMaps  map[string]*corev1.ConfigMap
	secrets     map[string]*corev1.Secret
}

// load decodes every document of every .yaml file in dir strictly into the
// Kubernetes type its apiVersion and kind name.
func load(dir string) (*manifests, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no .yaml file in %s", dir)
	}
	m := &manifests{configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}}
	var errs []error
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for i, doc := range documents(b) {
			if err := m.add(doc); err != nil {
				errs = append(errs, fmt.Errorf("%s, document %d: %w", filepath.Base(f), i+1, err))
			}
		}
	}
	return m, errors.Join(errs...)
}

// documents splits a YAML stream at its "---" lines, leaving out documents
// that hold only comments.
func documents(b []byte) [][]byte {
	var out [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		empty := true
		for _, l := range strings.Split(d, "\n") {
			if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
				empty = false
			}
		}
		if !empty {
			out = append(out, []byte(d))
		}
	}
	return out
}

func (m *manifests) add(doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	strict := func(obj any) error {
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return fmt.Errorf("%s %s: %w", tm.APIVersion, tm.Kind, err)
		}
		m.count++
		return nil
	}
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 Deployment":
		d := &appsv1.Deployment{}
		m.deployments = append(m.deployments, d)
		return strict(d)
	case "batch/v1 Job":
		j := &batchv1.Job{}
		m.jobs = append(m.jobs, j)
		return strict(j)
	case "v1 Service":
		s := &corev1.Service{}
		m.services = append(m.services, s)
		return strict(s)
	case "policy/v1 PodDisruptionBudget":
		p := &policyv1.PodDisruptionBudget{}
		m.pdbs = append(m.pdbs, p)
		return strict(p)
	case "v1 ConfigMap":
		c := &corev1.ConfigMap{}
		if err := strict(c); err != nil {
			return err
		}
		m.configMaps[c.Name] = c
		return nil
	case "v1 Secret":
		s := &corev1.Secret{}
		if err := strict(s); err != nil {
			return err
		}
		m.secrets[s.Name] = s
		return nil
	}
	return fmt.Errorf("apiVersion %q kind %q: not a kind this directory is expected to hold", tm.APIVersion, tm.Kind)
}

// knownSettings is every setting the service reads, from .env.example (a
// test of the service keeps that file complete): NAME= lines, commented or
// not.
func knownSettings(envExample string) (map[string]bool, error) {
	b, err := os.ReadFile(envExample)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#?\s*([A-Z][A-Z0-9_]*)=`).FindAllSubmatch(b, -1) {
		out[string(m[1])] = true
	}
	if len(out) < 10 {
		return nil, fmt.Errorf("%s names only %d settings", envExample, len(out))
	}
	return out, nil
}

// check relates the objects to each other and to the service.
func (m *manifests) check(settings map[string]bool) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for name, c := range m.configMaps {
		for _, k := range sortedKeys(c.Data) {
			if !settings[k] {
				fail("ConfigMap %s: %s is no setting of the service", name, k)
			}
		}
	}
	for name, s := range m.secrets {
		for _, k := range sortedKeys(s.StringData) {
			if !settings[k] {
				fail("Secret %s: %s is no setting of the service", name, k)
			}
		}
	}
	if len(m.deployments) != 1 || len(m.jobs) != 1 || len(m.services) != 1 || len(m.pdbs) != 1 {
		fail("want one Deployment, one migrate Job, one Service and one PodDisruptionBudget; have %d, %d, %d, %d",
			len(m.deployments), len(m.jobs), len(m.services), len(m.pdbs))
		return errs
	}
	d, job, svc, pdb := m.deployments[0], m.jobs[0], m.services[0], m.pdbs[0]

	// The pods' settings: every envFrom source exists in the directory.
	env := map[string]string{}
	for _, pod := range []struct {
		what string
		spec corev1.PodSpec
	}{{"Deployment " + d.Name, d.Spec.Template.Spec}, {"Job " + job.Name, job.Spec.Template.Spec}} {
		if len(pod.spec.Containers) != 1 {
			fail("%s: want one container, have %d", pod.what, len(pod.spec.Containers))
			return errs
		}
		for _, from := range pod.spec.Containers[0].EnvFrom {
			switch {
			case from.ConfigMapRef != nil:
				c, ok := m.configMaps[from.ConfigMapRef.Name]
				if !ok {
					fail("%s reads ConfigMap %s, which is not here", pod.what, from.ConfigMapRef.Name)
					continue
				}
				for k, v := range c.Data {
					env[k] = v
				}
			case from.SecretRef != nil:
				if _, ok := m.secrets[from.SecretRef.Name]; !ok {
					fail("%s reads Secret %s, which is not here", pod.what, from.SecretRef.Name)
				}
			}
		}
		if sc := pod.spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			fail("%s: runAsNonRoot is not set (the image runs as uid 65532)", pod.what)
		}
	}
	for _, s := range []string{"DATABASE_URL", "MIGRATE_DATABASE_URL"} {
		if !secretHas(m.secrets, s) {
			fail("no Secret holds %s", s)
		}
	}

	// The API: probes, ports and the stop sequence.
	c := d.Spec.Template.Spec.Containers[0]
	if !slices.Equal(c.Args, []string{"serve"}) {
		fail("Deployment %s: args %q, want [serve]", d.Name, c.Args)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	probe := func(what string, p *corev1.Probe, path string) {
		switch {
		case p == nil || p.HTTPGet == nil:
			fail("Deployment %s: no %s probe with httpGet %s", d.Name, what, path)
		case p.HTTPGet.Path != path:
			fail("Deployment %s: %s probe on %s, want %s", d.Name, what, p.HTTPGet.Path, path)
		case portOf(p.HTTPGet.Port, ports) != ports["http"]:
			fail("Deployment %s: %s probe on port %s, want the http port", d.Name, what, p.HTTPGet.Port.String())
		}
	}
	probe("readiness", c.ReadinessProbe, "/readyz")
	probe("liveness", c.LivenessProbe, "/livez")
	if p := addrPort(env["HTTP_ADDR"], ":8080"); ports["http"] != p {
		fail("Deployment %s: container port http is %d, HTTP_ADDR listens on %d", d.Name, ports["http"], p)
	}
	if a := env["METRICS_ADDR"]; a != "" && ports["metrics"] != addrPort(a, "") {
		fail("Deployment %s: container port metrics is %d, METRICS_ADDR listens on %d", d.Name, ports["metrics"], addrPort(a, ""))
	}
	drain, err1 := duration(env, "SHUTDOWN_DRAIN", "0s")
	timeout, err2 := duration(env, "SHUTDOWN_TIMEOUT", "20s")
	if err := errors.Join(err1, err2); err != nil {
		fail("ConfigMap: %v", err)
	}
	var preStop time.Duration
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		fail("Deployment %s: no preStop sleep (the pod is still in the endpoints for a few seconds after its deletion starts)", d.Name)
	} else {
		preStop = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
		if preStop != drain {
			fail("Deployment %s: preStop sleeps %s, want SHUTDOWN_DRAIN (%s)", d.Name, preStop, drain)
		}
	}
	need := preStop + drain + timeout + 5*time.Second
	if g := d.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second < need {
		fail("Deployment %s: terminationGracePeriodSeconds %v is shorter than preStop + SHUTDOWN_DRAIN + SHUTDOWN_TIMEOUT + 5s = %s: the kubelet would kill requests in progress",
			d.Name, deref(d.Spec.Template.Spec.TerminationGracePeriodSeconds), need)
	}
	if rs := d.Spec.Strategy.RollingUpdate; rs == nil || rs.MaxUnavailable == nil || rs.MaxUnavailable.IntValue() != 0 {
		fail("Deployment %s: a rollout must not take a ready replica away first (rollingUpdate.maxUnavailable: 0)", d.Name)
	}

	// Selectors: the Deployment's, the Service's and the budget's all
	// select the API's pods, and not the migrate Job's.
	podLabels := labels.Set(d.Spec.Template.Labels)
	jobLabels := labels.Set(job.Spec.Template.Labels)
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || !sel.Matches(podLabels) {
		fail("Deployment %s: its selector does not select its own pods (%v)", d.Name, err)
	}
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) || labels.SelectorFromSet(svc.Spec.Selector).Matches(jobLabels) {
		fail("Service %s: its selector must select the API's pods and not the migrate Job's", svc.Name)
	}
	if ps, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil || !ps.Matches(podLabels) || ps.Matches(jobLabels) {
		fail("PodDisruptionBudget %s: its selector must select the API's pods and not the migrate Job's (%v)", pdb.Name, err)
	}
	if pdb.Spec.MinAvailable == nil && pdb.Spec.MaxUnavailable == nil {
		fail("PodDisruptionBudget %s: neither minAvailable nor maxUnavailable", pdb.Name)
	}
	for _, p := range svc.Spec.Ports {
		if p.TargetPort.Type == intstr.String {
			if _, ok := ports[p.TargetPort.StrVal]; !ok {
				fail("Service %s: port %s targets %q, which the container does not name", svc.Name, p.Name, p.TargetPort.StrVal)
			}
		} else if !slices.Contains(mapValues(ports), p.TargetPort.IntVal) {
			fail("Service %s: port %s targets %d, which the container does not open", svc.Name, p.Name, p.TargetPort.IntVal)
		}
	}

	// The migrate Job runs `api migrate up` once, with no restarts in place.
	jc := job.Spec.Template.Spec.Containers[0]
	if !slices.Equal(jc.Args, []string{"migrate", "up"}) {
		fail("Job %s: args %q, want [migrate up]", job.Name, jc.Args)
	}
	if jc.Image != c.Image {
		fail("Job %s runs image %s, the Deployment %s: migrate with the release you deploy", job.Name, jc.Image, c.Image)
	}
	if rp := job.Spec.Template.Spec.RestartPolicy; rp != corev1.RestartPolicyNever && rp != corev1.RestartPolicyOnFailure {
		fail("Job %s: restartPolicy %q, want Never or OnFailure", job.Name, rp)
	}
	return errs
}

func secretHas(secrets map[string]*corev1.Secret, key string) bool {
	for _, s := range secrets {
		if _, ok := s.StringData[key]; ok {
			return true
		}
		if _, ok := s.Data[key]; ok {
			return true
		}
	}
	return false
}

// addrPort is the port of a listen address such as ":8080"; def when addr
// is empty.
func addrPort(addr, def string) int32 {
	if addr == "" {
		addr = def
	}
	i := strings.LastIndex(addr, ":")
	var p int32
	if i < 0 {
		return -1
	}
	if _, err := fmt.Sscanf(addr[i+1:], "%d", &p); err != nil {
		return -1
	}
	return p
}

func portOf(p intstr.IntOrString, named map[string]int32) int32 {
	if p.Type == intstr.String {
		if v, ok := named[p.StrVal]; ok {
			return v
		}
		return -1
	}
	return p.IntVal
}

func duration(env map[string]string, name, def string) (time.Duration, error) {
	v := env[name]
	if v == "" {
		v = def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %w", name, v, err)
	}
	return d, nil
}

func deref(p *int64) any {
	if p == nil {
		return "unset"
	}
	return *p
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func mapValues(m map[string]int32) []int32 {
	out := make([]int32, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
