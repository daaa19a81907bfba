// Package layering holds Parley's packages to their layers, reading what
// each imports from go list: pkg is the bottom (libraries), services build
// on pkg, testkit on pkg (to test it), and testkit/system (load tests and
// drills) on everything but the services' code, which it runs as built
// binaries. Check applies the import rules (make lint runs them over the
// workspace, testkit/cmd/layering); ToolsInBinaries finds test and
// operations tooling compiled into a service's program.
package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
)

// Module is the path every Parley package starts with.
const Module = "github.com/parleyhq/parley"

// Package is one package as go list describes it.
type Package struct {
	ImportPath string
	Name       string
	// Imports are those of its non-test files; TestImports of its in-package
	// test files, XTestImports of its _test package.
	Imports, TestImports, XTestImports []string
}

// Violation is one import that breaks a rule.
type Violation struct {
	Importer, Imported string
	// Test is set when only the importer's tests import it.
	Test bool
	Rule string
}

func (v Violation) String() string {
	where := ""
	if v.Test {
		where = " (in its tests)"
	}
	return fmt.Sprintf("%s imports %s%s: %s", v.Importer, v.Imported, where, v.Rule)
}

// layer names the part of the repository a package of Parley's is in:
// "pkg", "services/<folder>", "testkit", "testkit/system", or "" for any
// other package.
func layer(path string) string {
	rest, ok := strings.CutPrefix(path, Module+"/")
	if !ok {
		return ""
	}
	parts := strings.SplitN(rest, "/", 3)
	switch {
	case parts[0] == "pkg":
		return "pkg"
	case parts[0] == "services" && len(parts) > 1:
		return "services/" + parts[1]
	case parts[0] == "testkit" && len(parts) > 1 && parts[1] == "system":
		return "testkit/system"
	case parts[0] == "testkit":
		return "testkit"
	}
	return ""
}

// rule returns why from (a package in layer from) may not import to, or ""
// when it may; test says the import is in test files only.
func rule(from, to string, test bool) string {
	isService := func(l string) bool { return strings.HasPrefix(l, "services/") }
	switch {
	case to == "" || from == "" || from == to:
		return ""
	case from == "pkg" && isService(to):
		return "pkg never imports a service"
	case from == "pkg" && to == "testkit" && !test:
		return "pkg imports testkit only in its tests"
	case isService(from) && isService(to):
		return "a service imports only pkg and its own packages, never another service's"
	case isService(from) && to == "testkit" && !test:
		return "a service imports testkit only in its tests"
	case (from == "testkit" || from == "testkit/system") && isService(to):
		return "testkit never imports a service (testkit/system runs their built programs instead)"
	case to == "testkit/system":
		return "nothing imports testkit/system: it holds the load tests and drills, the top of the stack"
	}
	return ""
}

// Check returns every import of pkgs that breaks a rule, in their order.
func Check(pkgs []Package) []Violation {
	var out []Violation
	for _, p := range pkgs {
		from := layer(p.ImportPath)
		add := func(imports []string, test bool) {
			for _, imp := range imports {
				if test && slices.Contains(p.Imports, imp) {
					continue // reported once, as a non-test import
				}
				if r := rule(from, layer(imp), test); r != "" {
					out = append(out, Violation{Importer: p.ImportPath, Imported: imp, Test: test, Rule: r})
				}
			}
		}
		add(p.Imports, false)
		add(slices.Concat(p.TestImports, p.XTestImports), true)
	}
	return slices.CompactFunc(out, func(a, b Violation) bool { return a == b })
}

// Tools are the module paths a service's program must not depend on: test
// servers, container tooling, the browser driver and Parley's own testkit.
var Tools = []string{
	"github.com/nats-io/nats-server",
	"github.com/docker/compose",
	"github.com/chromedp",
	Module + "/testkit",
}

// ToolsInBinaries returns, for every main package among pkgs (go list -deps
// output of a module's packages: the mains and all they depend on), each
// dependency under one of the Tools paths, with the chain of imports that
// pulls it in: "<main> imports <tool> via a -> b -> c".
func ToolsInBinaries(pkgs []Package) []string {
	byPath := map[string]Package{}
	for _, p := range pkgs {
		byPath[p.ImportPath] = p
	}
	var out []string
	for _, p := range pkgs {
		if p.Name != "main" || layer(p.ImportPath) == "" {
			continue
		}
		// Breadth first, so that each chain is a shortest one.
		via := map[string]string{p.ImportPath: ""}
		queue := []string{p.ImportPath}
		for len(queue) > 0 {
			cur := queue[0]
			queue = queue[1:]
			if isTool(cur) {
				chain := []string{cur}
				for at := via[cur]; at != ""; at = via[at] {
					chain = append(chain, at)
				}
				slices.Reverse(chain)
				out = append(out, fmt.Sprintf("%s depends on %s (%s)", p.ImportPath, cur, strings.Join(chain, " -> ")))
				continue
			}
			for _, imp := range byPath[cur].Imports {
				if _, seen := via[imp]; !seen {
					via[imp] = cur
					queue = append(queue, imp)
				}
			}
		}
	}
	return out
}

func isTool(path string) bool {
	for _, t := range Tools {
		if path == t || strings.HasPrefix(path, t+"/") {
			return true
		}
	}
	return false
}

// List runs go list -json with args in dir (a module's folder) and returns
// the packages it describes.
func List(dir string, args ...string) ([]Package, error) {
	cmd := exec.Command("go", append([]string{"list", "-e", "-json=ImportPath,Name,Imports,TestImports,XTestImports,Error"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list in %s: %w\n%s", dir, err, stderr.Bytes())
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			Package
			Error *struct{ Err string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs, nil
		} else if err != nil {
			return nil, fmt.Errorf("go list in %s: %w", dir, err)
		}
		if p.Error != nil {
			return nil, fmt.Errorf("go list in %s: %s: %s", dir, p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p.Package)
	}
}

// Modules are the folders of the workspace's modules (go list -m, run in
// root, the folder of go.work).
func Modules(root string) ([]string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m in %s: %w", root, err)
	}
	return strings.Fields(string(out)), nil
}
