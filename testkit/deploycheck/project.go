package deploycheck

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/delivery"
	"github.com/parleyhq/parley/pkg/envdoc"
	"github.com/parleyhq/parley/pkg/record"
)

// MissingBinaryError is a compose service or Kubernetes workload that runs a
// program its image does not contain: no main package of the image's folder
// builds it, or the image holds one command and it is another.
type MissingBinaryError struct {
	Where  string // "compose service migrate", "kubernetes Job migrate"
	Binary string
	Image  Image
}

func (e *MissingBinaryError) Error() string {
	if e.Image.Copy != wholeFolder(e.Image.Folder) {
		return fmt.Sprintf("%s runs %s, but the image %s holds only %s (services/%s/cmd/%s)",
			e.Where, e.Binary, e.Image.Name, e.Image.Name, e.Image.Folder, e.Image.Name)
	}
	return fmt.Sprintf("%s runs %s, but services/%s has no main package that builds it (services/%s/cmd/%s)",
		e.Where, e.Binary, e.Image.Folder, e.Image.Folder, e.Binary)
}

// Image is one Parley image: a stage of deploy/docker/Dockerfile, the build
// target of a compose service and parley/<Name> in deploy/k8s, all named
// Name, whose ENTRYPOINT is the program Name, built from the module in
// services/<Folder>.
type Image struct {
	Name   string
	Folder string
	// Copy is what the stage copies from the build stage, which puts every
	// program of services/<folder> in /out/<folder>/: all of them
	// (/out/<folder>/) for a folder whose root is the program (admin's
	// parleyctl rides along), only /out/<folder>/<name> for one command of a
	// folder with several.
	Copy string
}

func wholeFolder(folder string) string { return "/out/" + folder + "/" }

// Images lists the images that the services/ folders build. A folder whose
// root package is a program is one image, named for the folder. A folder
// whose root is not (services/dispatcher, one module with a command per
// lane) is one image per command, cmd/<name>, named for the command: the
// lanes keep their own images, compose services and workloads.
func Images(root string) ([]Image, error) {
	folders, err := ServiceFolders(root)
	if err != nil {
		return nil, err
	}
	var images []Image
	for _, f := range folders {
		if buildsBinary(root, f, f) {
			images = append(images, Image{Name: f, Folder: f, Copy: wholeFolder(f)})
			continue
		}
		cmds, err := filepath.Glob(filepath.Join(root, "services", f, "cmd", "*"))
		if err != nil {
			return nil, err
		}
		n := len(images)
		for _, c := range cmds {
			if name := filepath.Base(c); buildsBinary(root, f, name) {
				images = append(images, Image{Name: name, Folder: f, Copy: wholeFolder(f) + name})
			}
		}
		if len(images) == n {
			return nil, fmt.Errorf("services/%s builds no program: no main package at its root or in cmd/*", f)
		}
	}
	return images, nil
}

// holds reports whether the image contains the program bin.
func (img Image) holds(root, bin string) bool {
	if img.Copy == wholeFolder(img.Folder) {
		return buildsBinary(root, img.Folder, bin)
	}
	return bin == img.Name
}

func findImage(images []Image, name string) (Image, bool) {
	for _, img := range images {
		if img.Name == name {
			return img, true
		}
	}
	return Image{}, false
}

// Project names what CheckProject cannot know from the files.
type Project struct {
	// NotDeployed lists the images that deploy/k8s leaves out on purpose,
	// with the reason.
	NotDeployed map[string]string
}

const (
	dockerfilePath  = "deploy/docker/Dockerfile"
	serviceTestFile = "internal/config/compose_test.go"
)

// CheckProject checks what ties the deployment files to the repository
// rather than to one service's configuration:
//   - every image of the services/ folders (Images) has a Dockerfile stage
//     of its name that copies its binaries from the build stage and runs its
//     program, and a compose service of its name built from that stage;
//   - every compose service that is built comes from deploy/docker/Dockerfile
//     at the repository root, from a stage named for an image;
//   - every program a compose service or Kubernetes workload runs is in its
//     image (errors of type *MissingBinaryError);
//   - every folder has internal/config/compose_test.go, and the compose
//     services and Kubernetes workloads that ComposeService and
//     KubernetesWorkload check there are exactly those built from its images;
//   - deploy/k8s lists all its files, deploys every image but the
//     NotDeployed ones, and scales each dispatcher with a KEDA ScaledObject
//     on the lag of every JetStream consumer its lane declares
//     (delivery.Consumers);
//   - the Makefile, the compose file and deploy/k8s name the NATS version
//     the tests embed, and start it with sync_interval: always (checkNATS).
func CheckProject(root string, p Project) []error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	folders, err := ServiceFolders(root)
	if err != nil {
		return []error{err}
	}
	images, err := Images(root)
	if err != nil {
		return []error{err}
	}
	compose, err := LoadCompose(context.Background(), filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		return []error{err}
	}
	df, err := ParseDockerfile(filepath.Join(root, dockerfilePath))
	if err != nil {
		return []error{err}
	}
	k8s, err := LoadKubernetes(filepath.Join(root, "deploy", "k8s"))
	if err != nil {
		return []error{err}
	}
	tested, testErrs := testedNames(root, folders)
	errs = append(errs, testErrs...)

	for _, img := range images {
		name := img.Name
		if _, ok := df.Stage(name); !ok {
			fail("%s has no stage %q: services/%s is never built into an image", dockerfilePath, name, img.Folder)
		} else {
			if !df.Copies(name, img.Copy, "/usr/local/bin/") {
				fail("%s stage %q does not COPY --from=build %s /usr/local/bin/", dockerfilePath, name, img.Copy)
			}
			want := fmt.Sprintf(`["/usr/local/bin/%s"]`, name)
			if in, ok := df.Find(name, "ENTRYPOINT"); !ok || in.Args != want {
				fail("%s stage %q: want ENTRYPOINT %s", dockerfilePath, name, want)
			}
		}
		if s, ok := compose.Project.Services[name]; !ok || s.Build == nil || s.Build.Target != name {
			fail("docker-compose.yml has no service %q built from target %q", name, name)
		}
	}

	for _, name := range sortedKeys(compose.Project.Services) {
		s := compose.Project.Services[name]
		if s.Build == nil {
			continue // a server's image, such as postgres
		}
		where := "compose service " + name
		if s.Build.Context != root {
			fail("%s: build context %s, want the repository root", where, s.Build.Context)
		}
		if s.Build.Dockerfile != dockerfilePath {
			fail("%s: dockerfile %q, want %s", where, s.Build.Dockerfile, dockerfilePath)
		}
		target := s.Build.Target
		img, ok := findImage(images, target)
		if !ok {
			fail("%s: build target %q is no image of services/ (a folder, or a command of one)", where, target)
			continue
		}
		if got, ok := tested["ComposeService"][name]; !ok {
			fail("%s: no deploycheck.ComposeService(t, %q, ...) in services/%s/%s", where, name, img.Folder, serviceTestFile)
		} else if got != img.Folder {
			fail("%s: checked in services/%s, but built from target %q of services/%s", where, got, target, img.Folder)
		}
		if len(s.Entrypoint) > 0 {
			if bin := path.Base(s.Entrypoint[0]); !img.holds(root, bin) {
				errs = append(errs, &MissingBinaryError{Where: where, Binary: bin, Image: img})
			}
		}
	}
	for _, name := range sortedKeys(tested["ComposeService"]) {
		if _, ok := compose.Project.Services[name]; !ok {
			fail("services/%s/%s checks compose service %q, which docker-compose.yml does not have", tested["ComposeService"][name], serviceTestFile, name)
		}
	}

	errs = append(errs, checkKubernetes(root, k8s, images, tested["KubernetesWorkload"], p)...)
	errs = append(errs, checkNATS(root, compose, k8s)...)
	return errs
}

func checkKubernetes(root string, k *Kubernetes, images []Image, tested map[string]string, p Project) []error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf("kubernetes: "+format, a...)) }
	files, err := filepath.Glob(filepath.Join(k.Dir, "*.yaml"))
	if err != nil {
		return []error{err}
	}
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" && !slices.Contains(k.Resources, b) {
			fail("%s is not in kustomization.yaml's resources, so it is never applied", b)
		}
	}
	deployed := map[string]bool{}
	for _, o := range k.Objects {
		if o.Kind != "Deployment" && o.Kind != "Job" {
			continue
		}
		where := fmt.Sprintf("%s %s", o.Kind, o.Name)
		_, w, err := k.Workload(o.Name)
		if err != nil {
			fail("%v", err)
			continue
		}
		c := w.Spec.Template.Spec.Containers[0]
		img, ok := findImage(images, c.Service())
		if !ok {
			fail("%s runs image %q, not parley/<an image of services/>", where, c.Image)
			continue
		}
		if o.Kind == "Deployment" {
			deployed[img.Name] = true
		}
		if got, ok := tested[o.Name]; !ok {
			fail("%s: no deploycheck.KubernetesWorkload(t, %q, ...) in services/%s/%s", where, o.Name, img.Folder, serviceTestFile)
		} else if got != img.Folder {
			fail("%s: checked in services/%s, but runs image %q of services/%s", where, got, c.Image, img.Folder)
		}
		if len(c.Command) > 0 {
			if bin := path.Base(c.Command[0]); !img.holds(root, bin) {
				errs = append(errs, &MissingBinaryError{Where: "kubernetes " + where, Binary: bin, Image: img})
			}
		}
		if strings.HasSuffix(o.Name, "-dispatcher") {
			if w.Spec.Replicas != nil {
				fail("%s sets replicas, which would fight its ScaledObject on every apply", where)
			}
			errs = append(errs, checkScaledObject(k, o.Name)...)
		}
	}
	for _, img := range images {
		if _, skip := p.NotDeployed[img.Name]; !deployed[img.Name] && !skip {
			fail("no Deployment runs parley/%s", img.Name)
		}
	}
	for _, name := range sortedKeys(tested) {
		if _, ok := k.Find("Deployment", name); !ok {
			if _, ok := k.Find("Job", name); !ok {
				fail("services/%s/%s checks workload %q, which deploy/k8s does not have", tested[name], serviceTestFile, name)
			}
		}
	}
	return errs
}

// checkScaledObject checks that the dispatcher scales on the lag of every
// durable consumer its lane takes batches from (delivery.Consumers: the
// campaign lane has two), each with a nats-jetstream trigger on the stream
// that the bus configuration uses, and on nothing else.
func checkScaledObject(k *Kubernetes, name string) []error {
	var errs []error
	fail := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("kubernetes ScaledObject %s: %s", name, fmt.Sprintf(format, a...)))
	}
	o, ok := k.Find("ScaledObject", name)
	if !ok {
		fail("missing: the dispatcher must scale on its consumers' lag")
		return errs
	}
	var so struct {
		Spec struct {
			ScaleTargetRef struct {
				Name string `yaml:"name"`
			} `yaml:"scaleTargetRef"`
			Triggers []struct {
				Type     string            `yaml:"type"`
				Metadata map[string]string `yaml:"metadata"`
			} `yaml:"triggers"`
		} `yaml:"spec"`
	}
	if err := o.Decode(&so); err != nil {
		fail("%v", err)
		return errs
	}
	if o.APIVersion != "keda.sh/v1alpha1" {
		fail("apiVersion %q, want keda.sh/v1alpha1", o.APIVersion)
	}
	if so.Spec.ScaleTargetRef.Name != name {
		fail("scales %q", so.Spec.ScaleTargetRef.Name)
	}
	lane := record.Lane(strings.TrimSuffix(name, "-dispatcher"))
	var declared []string
	for _, c := range delivery.Consumers(lane, bus.Config{}) {
		declared = append(declared, c.Name)
	}
	if len(declared) == 0 {
		fail("pkg/delivery has no lane %q, so no consumers to scale on", lane)
		return errs
	}
	stream := streamName(k)
	scaled := map[string]bool{}
	for i, tr := range so.Spec.Triggers {
		if tr.Type != "nats-jetstream" {
			fail("trigger %d is %q, want nats-jetstream", i+1, tr.Type)
			continue
		}
		md := tr.Metadata
		consumer := md["consumer"]
		switch {
		case !slices.Contains(declared, consumer):
			fail("consumer %q is not one the dispatcher takes batches from (%s)", consumer, strings.Join(declared, ", "))
		case scaled[consumer]:
			fail("two triggers on consumer %q", consumer)
		}
		scaled[consumer] = true
		if md["stream"] != stream {
			fail("stream %q, but the services use %q (trigger on %s)", md["stream"], stream, consumer)
		}
		if _, err := strconv.Atoi(md["lagThreshold"]); err != nil {
			fail("lagThreshold %q is not a number (trigger on %s)", md["lagThreshold"], consumer)
		}
		for _, key := range []string{"natsServerMonitoringEndpoint", "account"} {
			if md[key] == "" {
				fail("metadata.%s is empty (trigger on %s)", key, consumer)
			}
		}
	}
	for _, c := range declared {
		if !scaled[c] {
			fail("no nats-jetstream trigger on the durable consumer %q: its backlog would not scale the dispatcher", c)
		}
	}
	return errs
}

// streamName is the stream the deployed services use: the ConfigMap's
// PARLEY_NATS_STREAM, or bus.Config's default.
func streamName(k *Kubernetes) string {
	if data, ok := k.data("ConfigMap", "parley-config"); ok && data["PARLEY_NATS_STREAM"] != "" {
		return data["PARLEY_NATS_STREAM"]
	}
	return busStreamDefault()
}

// testedNames finds, in each folder's compose_test.go, the names passed to
// ComposeService and KubernetesWorkload: by function, name -> folder.
func testedNames(root string, folders []string) (map[string]map[string]string, []error) {
	tested := map[string]map[string]string{"ComposeService": {}, "KubernetesWorkload": {}}
	var errs []error
	for _, f := range folders {
		file := filepath.Join(root, "services", f, serviceTestFile)
		if _, err := os.Stat(file); err != nil {
			errs = append(errs, fmt.Errorf("services/%s has no %s: its deployment is not checked against its configuration", f, serviceTestFile))
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ast.Inspect(af, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			names, ok := tested[sel.Sel.Name]
			if x, isIdent := sel.X.(*ast.Ident); !ok || !isIdent || x.Name != "deploycheck" || len(call.Args) < 2 {
				return true
			}
			lit, ok := call.Args[1].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				errs = append(errs, fmt.Errorf("services/%s/%s: deploycheck.%s needs the name as a string literal", f, serviceTestFile, sel.Sel.Name))
				return true
			}
			name, _ := strconv.Unquote(lit.Value)
			if prev, dup := names[name]; dup && prev != f {
				errs = append(errs, fmt.Errorf("%q is checked by deploycheck.%s in both services/%s and services/%s", name, sel.Sel.Name, prev, f))
			}
			names[name] = f
			return true
		})
	}
	return tested, errs
}

// buildsBinary reports whether services/<folder> builds a program named bin:
// its root package (named like the folder) or cmd/<bin>.
func buildsBinary(root, folder, bin string) bool {
	dir := filepath.Join(root, "services", folder)
	if bin != folder {
		dir = filepath.Join(dir, "cmd", bin)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly)
		if err == nil && af.Name.Name == "main" {
			return true
		}
	}
	return false
}

// busStreamDefault is bus.Config's default stream name.
func busStreamDefault() string {
	for _, v := range envdoc.Vars(bus.Config{}) {
		if v.Name == "PARLEY_NATS_STREAM" {
			return v.Default
		}
	}
	return ""
}
