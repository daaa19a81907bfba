package deploycheck

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/parleyhq/parley/pkg/envdoc"
	"github.com/parleyhq/parley/pkg/ops"
)

// Kubernetes is a kustomize base: the objects of the files its
// kustomization.yaml lists, as written (no patches applied).
type Kubernetes struct {
	Dir       string
	Resources []string
	Objects   []Object
}

// Object is one Kubernetes object of the base.
type Object struct {
	File       string
	APIVersion string
	Kind       string
	Name       string
	node       *yaml.Node
}

// Decode decodes the whole object into v.
func (o Object) Decode(v any) error {
	if err := o.node.Decode(v); err != nil {
		return fmt.Errorf("%s: %s %s: %w", o.File, o.Kind, o.Name, err)
	}
	return nil
}

// DecodeYAML decodes every document of a YAML stream; empty documents are
// skipped.
func DecodeYAML(data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(n.Content) > 0 && n.Content[0].Kind != 0 {
			docs = append(docs, &n)
		}
	}
}

// LoadKubernetes reads the kustomize base in dir.
func LoadKubernetes(dir string) (*Kubernetes, error) {
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, fmt.Errorf("read kustomization: %w", err)
	}
	var kz struct {
		Resources []string `yaml:"resources"`
	}
	if err := yaml.Unmarshal(data, &kz); err != nil {
		return nil, fmt.Errorf("%s/kustomization.yaml: %w", dir, err)
	}
	k := &Kubernetes{Dir: dir, Resources: kz.Resources}
	for _, r := range kz.Resources {
		file := filepath.Join(dir, r)
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("kustomization resource %s: %w", r, err)
		}
		objects, err := decodeObjects(r, data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		k.Objects = append(k.Objects, objects...)
	}
	return k, nil
}

// decodeObjects decodes the objects of a YAML stream, each recorded as
// coming from file.
func decodeObjects(file string, data []byte) ([]Object, error) {
	docs, err := DecodeYAML(data)
	if err != nil {
		return nil, err
	}
	var objects []Object
	for _, d := range docs {
		var h struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
			Metadata   struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
		}
		if err := d.Decode(&h); err != nil {
			return nil, err
		}
		if h.APIVersion == "" || h.Kind == "" || h.Metadata.Name == "" {
			return nil, fmt.Errorf("an object without apiVersion, kind or metadata.name")
		}
		objects = append(objects, Object{File: file, APIVersion: h.APIVersion, Kind: h.Kind, Name: h.Metadata.Name, node: d})
	}
	return objects, nil
}

// Find returns the object of that kind and name.
func (k *Kubernetes) Find(kind, name string) (Object, bool) {
	for _, o := range k.Objects {
		if o.Kind == kind && o.Name == name {
			return o, true
		}
	}
	return Object{}, false
}

// Workload is the part of a Deployment or Job these checks read.
type Workload struct {
	Spec struct {
		Replicas *int `yaml:"replicas"`
		Template struct {
			Spec PodSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// PodSpec is the part of a pod spec these checks read.
type PodSpec struct {
	TerminationGracePeriodSeconds *int64          `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               securityContext `yaml:"securityContext"`
	Containers                    []Container     `yaml:"containers"`
}

type securityContext struct {
	RunAsNonRoot *bool `yaml:"runAsNonRoot"`
}

// Container is the part of a container these checks read.
type Container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Ports   []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom any    `yaml:"valueFrom"`
	} `yaml:"env"`
	EnvFrom []struct {
		ConfigMapRef *struct {
			Name string `yaml:"name"`
		} `yaml:"configMapRef"`
		SecretRef *struct {
			Name string `yaml:"name"`
		} `yaml:"secretRef"`
	} `yaml:"envFrom"`
	ReadinessProbe  *Probe          `yaml:"readinessProbe"`
	LivenessProbe   *Probe          `yaml:"livenessProbe"`
	SecurityContext securityContext `yaml:"securityContext"`
}

// Probe is an HTTP probe.
type Probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
}

// Service is the Parley image the container runs (Images), by the image
// naming convention parley/<name>[:tag]; empty for any other image.
func (c Container) Service() string {
	name, _, _ := strings.Cut(c.Image, "@")
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	service, ok := strings.CutPrefix(name, "parley/")
	if !ok {
		return ""
	}
	return service
}

// Workload returns the Deployment or Job called name and its only container.
func (k *Kubernetes) Workload(name string) (Object, Workload, error) {
	o, ok := k.Find("Deployment", name)
	if !ok {
		if o, ok = k.Find("Job", name); !ok {
			return Object{}, Workload{}, fmt.Errorf("no Deployment or Job %q in %s", name, k.Dir)
		}
	}
	var w Workload
	if err := o.Decode(&w); err != nil {
		return o, w, err
	}
	if n := len(w.Spec.Template.Spec.Containers); n != 1 {
		return o, w, fmt.Errorf("%s %s has %d containers, these checks expect 1", o.Kind, name, n)
	}
	return o, w, nil
}

// data returns the keys of a ConfigMap (data) or Secret (stringData, data).
func (k *Kubernetes) data(kind, name string) (map[string]string, bool) {
	o, ok := k.Find(kind, name)
	if !ok {
		return nil, false
	}
	var v struct {
		Data       map[string]string `yaml:"data"`
		StringData map[string]string `yaml:"stringData"`
	}
	if err := o.Decode(&v); err != nil {
		return nil, false
	}
	out := map[string]string{}
	for key, val := range v.Data {
		out[key] = val // base64 in a Secret: only the key matters there
	}
	for key, val := range v.StringData {
		out[key] = val
	}
	return out, true
}

var repoKubernetes struct {
	once sync.Once
	k    *Kubernetes
	err  error
}

// RepoKubernetes loads the repository's deploy/k8s once per process: the
// objects `kustomize build` renders when KustomizeEnv names kustomize, the
// files as written otherwise.
func RepoKubernetes() (*Kubernetes, error) {
	repoKubernetes.once.Do(func() {
		if k, ok, err := repoRendered(); ok {
			repoKubernetes.k, repoKubernetes.err = k, err
			return
		}
		root, err := RepoRoot()
		if err != nil {
			repoKubernetes.err = err
			return
		}
		repoKubernetes.k, repoKubernetes.err = LoadKubernetes(filepath.Join(root, "deploy", "k8s"))
	})
	return repoKubernetes.k, repoKubernetes.err
}

// KubernetesWorkload checks the Deployment or Job called name in the
// repository's deploy/k8s against cfg and reports every problem found (see
// Kubernetes.CheckWorkload).
func KubernetesWorkload(t testing.TB, name string, cfg any) {
	t.Helper()
	k, err := RepoKubernetes()
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range k.CheckWorkload(name, cfg) {
		t.Error(err)
	}
}

// CheckWorkload compares the Deployment or Job called name with cfg, the
// zero value of the configuration struct of the program it runs:
//   - each PARLEY_* variable the container sets itself is one cfg reads;
//   - ConfigMaps and Secrets it takes its environment from are in the base;
//   - no variable is left at, or set to, a loopback default;
//   - a required variable without a default is set;
//   - the pod runs as non-root;
//   - a Deployment's container port is the listen address's port, its
//     readiness probe is /readyz and its liveness probe /healthz (so that a
//     dependency outage stops traffic rather than restarting pods), on that
//     port; and its terminationGracePeriodSeconds covers PARLEY_DRAIN_DELAY
//     plus ops.Server's shutdown timeout.
func (k *Kubernetes) CheckWorkload(name string, cfg any) []error {
	var errs []error
	fail := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("kubernetes %s: %s", name, fmt.Sprintf(format, a...)))
	}
	o, w, err := k.Workload(name)
	if err != nil {
		fail("%v", err)
		return errs
	}
	vars, err := configVars(cfg)
	if err != nil {
		fail("%v", err)
		return errs
	}
	cfgName := fmt.Sprintf("%T", cfg)
	byName := map[string]envdoc.Var{}
	for _, v := range vars {
		byName[v.Name] = v
	}
	pod := w.Spec.Template.Spec
	c := pod.Containers[0]

	// What the container's environment holds: envFrom first, env overrides.
	env := map[string]*string{}
	for _, ef := range c.EnvFrom {
		kind, ref := "ConfigMap", ""
		switch {
		case ef.ConfigMapRef != nil:
			ref = ef.ConfigMapRef.Name
		case ef.SecretRef != nil:
			kind, ref = "Secret", ef.SecretRef.Name
		}
		data, ok := k.data(kind, ref)
		if !ok {
			fail("takes its environment from %s %q, which is not in the base", kind, ref)
			continue
		}
		for key, val := range data {
			env[key] = &val
		}
	}
	for _, e := range c.Env {
		if _, ok := byName[e.Name]; strings.HasPrefix(e.Name, "PARLEY_") && !ok {
			fail("sets %s, which %s does not read (a typo, or a setting renamed or removed)", e.Name, cfgName)
		}
		if e.ValueFrom != nil {
			env[e.Name] = nil // from a Secret key or the downward API: unknown here
			continue
		}
		env[e.Name] = &e.Value
	}
	value := func(v envdoc.Var) (string, bool) {
		val, set := env[v.Name]
		switch {
		case !set:
			return v.Default, false
		case val == nil:
			return "", true
		}
		return *val, true
	}
	for _, v := range vars {
		val, set := value(v)
		if v.Required && !v.HasDefault && !set {
			fail("does not set %s, which %s requires", v.Name, cfgName)
		}
		if host, ok := hostOf(val); ok && isLoopback(host) {
			if set {
				fail("sets %s=%q: loopback in a pod is the pod itself", v.Name, val)
			} else {
				fail("does not set %s, whose default %q is loopback: in a pod that is the pod itself", v.Name, val)
			}
		}
	}
	if !isTrue(pod.SecurityContext.RunAsNonRoot) && !isTrue(c.SecurityContext.RunAsNonRoot) {
		fail("does not set runAsNonRoot: true")
	}
	if o.Kind != "Deployment" {
		return errs
	}

	lv, ok := byName[ListenVar(c.Service())]
	if !ok {
		fail("runs image %q, but %s has no %s", c.Image, cfgName, ListenVar(c.Service()))
		return errs
	}
	val, set := value(lv)
	port, err := listenPort(lv, val, set)
	if err != nil {
		fail("%v", err)
		return errs
	}
	portName := ""
	if len(c.Ports) != 1 || fmt.Sprint(c.Ports[0].ContainerPort) != port {
		fail("container ports %v: want exactly %s, where it listens (%s)", c.Ports, port, lv.Name)
	} else {
		portName = c.Ports[0].Name
	}
	for _, p := range []struct {
		kind, want string
		probe      *Probe
	}{{"readiness", "/readyz", c.ReadinessProbe}, {"liveness", "/healthz", c.LivenessProbe}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			fail("has no HTTP %s probe", p.kind)
			continue
		}
		g := p.probe.HTTPGet
		if g.Path != p.want || !servesProbe(g.Path) {
			fail("%s probe on %q: want %s", p.kind, g.Path, p.want)
		}
		if ps := fmt.Sprint(g.Port); ps != port && (portName == "" || ps != portName) {
			fail("%s probe on port %v: the service listens on %s", p.kind, g.Port, port)
		}
	}

	shutdown := shutdownTimeout()
	drain, err := drainDelay(byName, value)
	if err != nil {
		fail("%v", err)
	}
	grace := 30 * time.Second // the Kubernetes default
	if g := pod.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	if grace < drain+shutdown {
		fail("terminationGracePeriodSeconds %v is shorter than PARLEY_DRAIN_DELAY %v plus the shutdown timeout %v: pods would be killed mid-drain", grace, drain, shutdown)
	}
	return errs
}

func isTrue(b *bool) bool { return b != nil && *b }

// shutdownTimeout is how long ops.Server lets in-flight requests finish.
func shutdownTimeout() time.Duration { return ops.NewServer("", nil).ShutdownTimeout }

// drainDelay is the PARLEY_DRAIN_DELAY a service runs with, zero when its
// configuration has none.
func drainDelay(byName map[string]envdoc.Var, value func(envdoc.Var) (string, bool)) (time.Duration, error) {
	v, ok := byName["PARLEY_DRAIN_DELAY"]
	if !ok {
		return 0, nil
	}
	val, _ := value(v)
	d, err := time.ParseDuration(val)
	if err != nil {
		return 0, fmt.Errorf("PARLEY_DRAIN_DELAY %q: %w", val, err)
	}
	return d, nil
}
