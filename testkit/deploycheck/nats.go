package deploycheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

var (
	makefileNATSVersion = regexp.MustCompile(`(?m)^NATS_SERVER_VERSION\s*:?=\s*v(\S+)\s*$`)
	syncAlways          = regexp.MustCompile(`(?m)^\s*sync_interval\s*:\s*always\s*$`)
)

// checkNATS holds every place that names a NATS version to the one the
// tests embed (the nats-server module testkit/go.mod requires): the Makefile's
// NATS_SERVER_VERSION (the binary of bin/ the drills and compose-smoke run),
// the compose service nats's image and every nats image of deploy/k8s, as
// nats:<version> or nats:<version>-<variant>. The configuration each of them
// starts nats-server with must set JetStream's sync_interval to always
// (docs/operations.md, "NATS versions and sync_interval").
func checkNATS(root string, compose *Compose, k *Kubernetes) []error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf("nats: "+format, a...)) }
	want := natsserver.VERSION

	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		return []error{err}
	}
	if m := makefileNATSVersion.FindSubmatch(mk); m == nil {
		fail("the Makefile sets no NATS_SERVER_VERSION")
	} else if got := string(m[1]); got != want {
		fail("the Makefile pins nats-server v%s, the tests embed v%s (testkit/go.mod)", got, want)
	}

	svc, ok := compose.Project.Services["nats"]
	if !ok {
		fail("docker-compose.yml has no service nats")
	} else {
		if v := imageVersion(svc.Image); v != want {
			fail("compose service nats runs image %q, want nats:%s-alpine (the version the tests embed)", svc.Image, want)
		}
		conf := configArg(svc.Command)
		var source string
		for _, v := range svc.Volumes {
			if v.Target == conf {
				source = v.Source
			}
		}
		switch {
		case conf == "":
			fail("compose service nats: its command names no --config file, so sync_interval is the default")
		case source == "":
			fail("compose service nats: no volume mounts its --config file %s", conf)
		default:
			data, err := os.ReadFile(source)
			if err != nil {
				fail("compose service nats: %v", err)
			} else if !syncAlways.Match(data) {
				fail("compose service nats: %s does not set sync_interval: always", source)
			}
		}
	}

	found := 0
	for _, o := range k.Objects {
		if o.Kind != "StatefulSet" && o.Kind != "Deployment" {
			continue
		}
		var w struct {
			Spec struct {
				Template struct {
					Spec struct {
						Containers []struct {
							Image        string   `yaml:"image"`
							Command      []string `yaml:"command"`
							Args         []string `yaml:"args"`
							VolumeMounts []struct {
								Name      string `yaml:"name"`
								MountPath string `yaml:"mountPath"`
								SubPath   string `yaml:"subPath"`
							} `yaml:"volumeMounts"`
						} `yaml:"containers"`
						Volumes []struct {
							Name      string `yaml:"name"`
							ConfigMap *struct {
								Name string `yaml:"name"`
							} `yaml:"configMap"`
						} `yaml:"volumes"`
					} `yaml:"spec"`
				} `yaml:"template"`
			} `yaml:"spec"`
		}
		if err := o.Decode(&w); err != nil {
			fail("%s %s: %v", o.Kind, o.Name, err)
			continue
		}
		pod := w.Spec.Template.Spec
		for _, c := range pod.Containers {
			name, _, _ := strings.Cut(c.Image, ":")
			if name != "nats" && !strings.HasSuffix(name, "/nats") {
				continue
			}
			found++
			where := fmt.Sprintf("kubernetes %s %s", o.Kind, o.Name)
			if v := imageVersion(c.Image); v != want {
				fail("%s runs image %q, want nats:%s-alpine (the version the tests embed)", where, c.Image, want)
			}
			conf := configArg(append(slices.Clone(c.Command), c.Args...))
			if conf == "" {
				fail("%s: its args name no --config file, so sync_interval is the default", where)
				continue
			}
			var text string
			var mounted bool
			for _, m := range c.VolumeMounts {
				if m.MountPath != conf {
					continue
				}
				for _, v := range pod.Volumes {
					if v.Name == m.Name && v.ConfigMap != nil {
						data, _ := k.data("ConfigMap", v.ConfigMap.Name)
						text, mounted = data[m.SubPath], true
					}
				}
			}
			if !mounted {
				fail("%s: no ConfigMap is mounted at its --config file %s (with subPath)", where, conf)
			} else if !syncAlways.MatchString(text) {
				fail("%s: its configuration %s does not set sync_interval: always", where, conf)
			}
		}
	}
	if found == 0 {
		fail("deploy/k8s runs no nats image")
	}
	return errs
}

// imageVersion is the version of a nats image reference: "2.15.2" for
// nats:2.15.2-alpine or nats:2.15.2, "" without a tag.
func imageVersion(image string) string {
	_, tag, ok := strings.Cut(image, ":")
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(tag, "-")
	return v
}

// configArg is the file nats-server's -c/--config flag names in argv.
func configArg(argv []string) string {
	for i, a := range argv {
		for _, flag := range []string{"-c", "--config", "-config"} {
			if a == flag && i+1 < len(argv) {
				return argv[i+1]
			}
			if v, ok := strings.CutPrefix(a, flag+"="); ok {
				return v
			}
		}
	}
	return ""
}
