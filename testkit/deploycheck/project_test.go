package deploycheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// notDeployed are the services deploy/k8s leaves out on purpose.
var notDeployed = map[string]string{
	"provider-sim": "a local stand-in for the WhatsApp Cloud API; production talks to the real one",
}

func TestProject(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range CheckProject(root, Project{NotDeployed: notDeployed}) {
		t.Error(err)
	}
}

// TestCheckProjectFindsDrift breaks a copy of the repository's deployment
// files in the ways that happen and wants each one reported.
func TestCheckProjectFindsDrift(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(t *testing.T, root string)
		want   []string
	}{
		{"service without a test", func(t *testing.T, root string) {
			remove(t, root, "services/gateway/internal/config/compose_test.go")
		}, []string{
			"services/gateway has no internal/config/compose_test.go",
			`compose service gateway: no deploycheck.ComposeService(t, "gateway", ...)`,
			`Deployment gateway: no deploycheck.KubernetesWorkload(t, "gateway", ...)`,
		}},
		{"new service without deployment", func(t *testing.T, root string) {
			write(t, root, "services/widget/go.mod", "module example.com/widget\n")
			write(t, root, "services/widget/main.go", "package main\n\nfunc main() {}\n")
		}, []string{
			`deploy/docker/Dockerfile has no stage "widget"`,
			`docker-compose.yml has no service "widget"`,
			"services/widget has no internal/config/compose_test.go",
			"no Deployment runs parley/widget",
		}},
		{"new command of the dispatcher without deployment", func(t *testing.T, root string) {
			write(t, root, "services/dispatcher/cmd/batch-dispatcher/main.go", "package main\n\nfunc main() {}\n")
		}, []string{
			`deploy/docker/Dockerfile has no stage "batch-dispatcher": services/dispatcher is never built`,
			`docker-compose.yml has no service "batch-dispatcher"`,
			"no Deployment runs parley/batch-dispatcher",
		}},
		{"service module that builds no program", func(t *testing.T, root string) {
			write(t, root, "services/widget/go.mod", "module example.com/widget\n")
			write(t, root, "services/widget/widget.go", "package widget\n")
		}, []string{"services/widget builds no program"}},
		{"dispatcher stage that copies the other lane's binary", func(t *testing.T, root string) {
			edit(t, root, "deploy/docker/Dockerfile", "COPY --from=build /out/dispatcher/campaign-dispatcher ", "COPY --from=build /out/dispatcher/automation-dispatcher ")
		}, []string{`stage "campaign-dispatcher" does not COPY --from=build /out/dispatcher/campaign-dispatcher /usr/local/bin/`}},
		{"workload that runs the other lane's command", func(t *testing.T, root string) {
			edit(t, root, "docker-compose.yml", "image: parley/automation-dispatcher:dev\n", "image: parley/automation-dispatcher:dev\n    entrypoint: [\"campaign-dispatcher\"]\n")
		}, []string{"compose service automation-dispatcher runs campaign-dispatcher, but the image automation-dispatcher holds only automation-dispatcher"}},
		{"stage that runs the wrong binary", func(t *testing.T, root string) {
			edit(t, root, "deploy/docker/Dockerfile", `ENTRYPOINT ["/usr/local/bin/gateway"]`, `ENTRYPOINT ["/usr/local/bin/gw"]`)
		}, []string{`stage "gateway": want ENTRYPOINT ["/usr/local/bin/gateway"]`}},
		{"test of a service compose does not have", func(t *testing.T, root string) {
			edit(t, root, "services/admin/internal/config/compose_test.go", `ComposeService(t, "migrate"`, `ComposeService(t, "migrat"`)
		}, []string{
			`compose service migrate: no deploycheck.ComposeService(t, "migrate", ...) in services/admin`,
			`checks compose service "migrat", which docker-compose.yml does not have`,
		}},
		{"compose runs a program nobody builds", func(t *testing.T, root string) {
			edit(t, root, "docker-compose.yml", `entrypoint: ["parleyctl"]`, `entrypoint: ["parleyctrl"]`)
		}, []string{"compose service migrate runs parleyctrl, but services/admin has no main package"}},
		{"manifest left out of the kustomization", func(t *testing.T, root string) {
			edit(t, root, "deploy/k8s/kustomization.yaml", "  - admin.yaml\n", "")
		}, []string{
			"admin.yaml is not in kustomization.yaml's resources",
			"no Deployment runs parley/admin",
			`checks workload "admin", which deploy/k8s does not have`,
		}},
		{"scaler on the wrong consumer", func(t *testing.T, root string) {
			edit(t, root, "deploy/k8s/campaign-dispatcher.yaml", "consumer: campaign-dispatcher", "consumer: campaign")
			edit(t, root, "deploy/k8s/automation-dispatcher.yaml", "stream: SENDS", "stream: sends")
		}, []string{
			`ScaledObject campaign-dispatcher: consumer "campaign" is not one the dispatcher takes batches from (campaign-dispatcher, campaign-dispatcher-batch)`,
			`ScaledObject campaign-dispatcher: no nats-jetstream trigger on the durable consumer "campaign-dispatcher"`,
			`ScaledObject automation-dispatcher: stream "sends", but the services use "SENDS"`,
		}},
		{"scaler missing the batch consumer", func(t *testing.T, root string) {
			edit(t, root, "deploy/k8s/campaign-dispatcher.yaml", "consumer: campaign-dispatcher-batch", "consumer: campaign-dispatcher")
		}, []string{
			`ScaledObject campaign-dispatcher: two triggers on consumer "campaign-dispatcher"`,
			`ScaledObject campaign-dispatcher: no nats-jetstream trigger on the durable consumer "campaign-dispatcher-batch"`,
		}},
		{"NATS versions that disagree", func(t *testing.T, root string) {
			edit(t, root, "Makefile", "NATS_SERVER_VERSION := v2.15.2", "NATS_SERVER_VERSION := v2.14.0")
			edit(t, root, "docker-compose.yml", "image: nats:2.15.2-alpine", "image: nats:2.10-alpine")
			edit(t, root, "deploy/k8s/nats.yaml", "image: nats:2.15.2-alpine", "image: nats:latest")
		}, []string{
			"the Makefile pins nats-server v2.14.0, the tests embed v2.15.2",
			`compose service nats runs image "nats:2.10-alpine", want nats:2.15.2-alpine`,
			`kubernetes StatefulSet nats runs image "nats:latest", want nats:2.15.2-alpine`,
		}},
		{"NATS without sync_interval always", func(t *testing.T, root string) {
			edit(t, root, "deploy/nats/nats-server.conf", "sync_interval: always", "sync_interval: 2m")
			edit(t, root, "deploy/k8s/nats.yaml", "sync_interval: always", "")
		}, []string{
			"deploy/nats/nats-server.conf does not set sync_interval: always",
			"kubernetes StatefulSet nats: its configuration /etc/nats/parley.conf does not set sync_interval: always",
		}},
		{"NATS started without its configuration", func(t *testing.T, root string) {
			edit(t, root, "docker-compose.yml", `command: ["nats-server", "--config", "/etc/nats/parley.conf"]`, `command: ["nats-server", "-js"]`)
			edit(t, root, "deploy/k8s/nats.yaml", "subPath: nats-server.conf", "subPath: other.conf")
		}, []string{
			"compose service nats: its command names no --config file",
			"kubernetes StatefulSet nats: its configuration /etc/nats/parley.conf does not set sync_interval: always",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := copyRepo(t)
			tt.mutate(t, root)
			assertProblems(t, CheckProject(root, Project{NotDeployed: notDeployed}), tt.want)
		})
	}
}

// copyRepo copies what CheckProject reads into a temporary directory.
func copyRepo(t *testing.T) string {
	t.Helper()
	src, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			switch {
			case rel == ".git", rel == "bin", rel == "pkg", strings.HasPrefix(d.Name(), "."), d.Name() == "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		wanted := rel == "go.work" || rel == "docker-compose.yml" || rel == "Makefile" || strings.HasPrefix(rel, "deploy"+string(filepath.Separator)) ||
			(strings.HasPrefix(rel, "services"+string(filepath.Separator)) && (strings.HasSuffix(rel, ".go") || d.Name() == "go.mod"))
		if !wanted {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		write(t, dst, rel, string(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func write(t *testing.T, root, rel, content string) {
	t.Helper()
	path := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, root, rel string) {
	t.Helper()
	if err := os.Remove(filepath.Join(root, rel)); err != nil {
		t.Fatal(err)
	}
}

func edit(t *testing.T, root, rel, old, new string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		t.Fatalf("%s does not contain %q", rel, old)
	}
	write(t, root, rel, strings.Replace(string(data), old, new, 1))
}

// TestYAMLParses decodes every YAML file of the repository, the ones no
// other check reads included.
func TestYAMLParses(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if ext := filepath.Ext(path); d.IsDir() || (ext != ".yaml" && ext != ".yml") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if _, err := DecodeYAML(data); err != nil {
			t.Errorf("%s: %v", path, err)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 8 {
		t.Errorf("parsed %d YAML files; the compose file and deploy/k8s alone have 8", n)
	}
}
