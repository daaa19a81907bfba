package deploycheck

import (
	"os"
	"path/filepath"
	"testing"
)

// TestKustomizeBuild renders deploy/k8s with the kustomize of
// PARLEY_KUSTOMIZE (make compose-check builds the pinned one and sets it)
// and holds the result to the base: the same objects, in namespace parley,
// parley images tagged, the NATS version and sync_interval of checkNATS
// and each dispatcher's ScaledObject.
func TestKustomizeBuild(t *testing.T) {
	bin := os.Getenv(KustomizeEnv)
	if bin == "" {
		t.Skipf("%s is unset: make compose-check runs this with the pinned kustomize", KustomizeEnv)
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "deploy", "k8s")
	base, err := LoadKubernetes(dir)
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := RenderKubernetes(bin, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range CheckRendered(base, rendered, "parley") {
		t.Error(err)
	}
	compose, err := RepoCompose()
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range checkNATS(root, compose, rendered) {
		t.Error(err)
	}
	for _, name := range []string{"campaign-dispatcher", "automation-dispatcher"} {
		for _, err := range checkScaledObject(rendered, name) {
			t.Error(err)
		}
	}
}

// CheckRendered finds an object left out, one added, one in the wrong
// namespace and an untagged parley image.
func TestCheckRendered(t *testing.T) {
	base, err := decodeObjects("base.yaml", []byte(`
apiVersion: v1
kind: ConfigMap
metadata: {name: parley-config}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: gateway}
spec: {template: {spec: {containers: [{name: gateway, image: parley/gateway}]}}}
---
apiVersion: v1
kind: Service
metadata: {name: nats}
`))
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := decodeObjects("kustomize build", []byte(`
apiVersion: v1
kind: ConfigMap
metadata: {name: parley-config, namespace: default}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: gateway, namespace: parley}
spec: {template: {spec: {containers: [{name: gateway, image: parley/gateway}, {name: side, image: "registry:5000/nats"}]}}}
---
apiVersion: v1
kind: Secret
metadata: {name: extra, namespace: parley}
`))
	if err != nil {
		t.Fatal(err)
	}
	assertProblems(t, CheckRendered(&Kubernetes{Objects: base}, &Kubernetes{Objects: rendered}, "parley"), []string{
		`ConfigMap parley-config is in namespace "default", want "parley"`,
		`Deployment gateway runs "parley/gateway" without a tag`,
		"Service nats of the base is not rendered",
		"renders Secret extra, which no file of the base has",
	})
	for image, tag := range map[string]string{"parley/gateway:1.2": "1.2", "registry:5000/parley/gateway": "", "nats": ""} {
		if got := imageTag(image); got != tag {
			t.Errorf("imageTag(%q) = %q, want %q", image, got, tag)
		}
	}
}
