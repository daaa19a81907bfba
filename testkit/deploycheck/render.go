package deploycheck

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
)

// KustomizeEnv names the kustomize binary (make compose-check sets it to
// the pinned one of bin/). When it is set, RepoKubernetes returns the
// objects `kustomize build deploy/k8s` renders rather than the files as
// written, so that the services' KubernetesWorkload checks hold the
// rendered objects (namespace, labels and image tags applied) to their
// configuration.
const KustomizeEnv = "PARLEY_KUSTOMIZE"

// RenderKubernetes runs `kustomize build dir` and returns the objects it
// renders. Resources is the kustomization's, as LoadKubernetes reads it;
// every object's File is "kustomize build".
func RenderKubernetes(kustomize, dir string) (*Kubernetes, error) {
	base, err := LoadKubernetes(dir)
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(kustomize, "build", dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s build %s: %w\n%s", kustomize, dir, err, stderr.String())
	}
	objects, err := decodeObjects("kustomize build", stdout.Bytes())
	if err != nil {
		return nil, err
	}
	return &Kubernetes{Dir: dir, Resources: base.Resources, Objects: objects}, nil
}

// CheckRendered compares what kustomize rendered with the base as
// written: the same objects (kind and name), each in namespace, and every
// parley/ image with a tag (the kustomization's images).
func CheckRendered(base, rendered *Kubernetes, namespace string) []error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf("kustomize build: "+format, a...)) }
	key := func(o Object) string { return o.Kind + " " + o.Name }
	var want, got []string
	for _, o := range base.Objects {
		want = append(want, key(o))
	}
	for _, o := range rendered.Objects {
		got = append(got, key(o))
		var meta struct {
			Metadata struct {
				Namespace string `yaml:"namespace"`
			} `yaml:"metadata"`
			Spec struct {
				Template struct {
					Spec struct {
						Containers []Container `yaml:"containers"`
					} `yaml:"spec"`
				} `yaml:"template"`
			} `yaml:"spec"`
		}
		if err := o.Decode(&meta); err != nil {
			fail("%v", err)
			continue
		}
		if meta.Metadata.Namespace != namespace {
			fail("%s is in namespace %q, want %q", key(o), meta.Metadata.Namespace, namespace)
		}
		for _, c := range meta.Spec.Template.Spec.Containers {
			if c.Service() != "" && imageTag(c.Image) == "" {
				fail("%s runs %q without a tag", key(o), c.Image)
			}
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	for _, w := range want {
		if !slices.Contains(got, w) {
			fail("%s of the base is not rendered", w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			fail("renders %s, which no file of the base has", g)
		}
	}
	return errs
}

// imageTag is the tag of an image reference, "" without one.
func imageTag(image string) string {
	for i := len(image) - 1; i >= 0 && image[i] != '/'; i-- {
		if image[i] == ':' {
			return image[i+1:]
		}
	}
	return ""
}

// repoRendered renders the repository's deploy/k8s with the kustomize of
// KustomizeEnv; ok is false when the variable is unset.
func repoRendered() (k *Kubernetes, ok bool, err error) {
	bin := os.Getenv(KustomizeEnv)
	if bin == "" {
		return nil, false, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, true, err
	}
	k, err = RenderKubernetes(bin, filepath.Join(root, "deploy", "k8s"))
	return k, true, err
}
