package layering

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parleyhq/parley/testkit/serviceproc"
)

const (
	gwHTTP    = Module + "/services/gateway/internal/httpapi"
	gwMain    = Module + "/services/gateway"
	adminCLI  = Module + "/services/admin/internal/cli"
	phone     = Module + "/pkg/phone"
	storetest = Module + "/testkit/storetest"
	loadtest  = Module + "/testkit/system/loadtest"
)

// Each rule flags the import it forbids, names both ends, and leaves the
// allowed ones alone.
func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		pkg  Package
		want []string // "importer imports imported" of each violation; none when allowed
	}{
		{"a service on pkg and its own internal", Package{ImportPath: gwMain, Imports: []string{phone, gwHTTP, "fmt"}}, nil},
		{"a service's tests on testkit", Package{ImportPath: gwMain, TestImports: []string{storetest}, XTestImports: []string{storetest}}, nil},
		{"pkg's tests on testkit", Package{ImportPath: phone, XTestImports: []string{storetest}}, nil},
		{"testkit on pkg", Package{ImportPath: storetest, Imports: []string{phone}}, nil},
		{"testkit/system on testkit", Package{ImportPath: loadtest, Imports: []string{storetest, phone}}, nil},
		{"a service on another service", Package{ImportPath: gwMain, Imports: []string{adminCLI}},
			[]string{gwMain + " imports " + adminCLI + ": a service imports only pkg"}},
		{"a service's tests on another service", Package{ImportPath: gwMain, TestImports: []string{adminCLI}},
			[]string{gwMain + " imports " + adminCLI + " (in its tests): a service imports only pkg"}},
		{"a service's code on testkit", Package{ImportPath: gwHTTP, Imports: []string{storetest}, TestImports: []string{storetest}},
			[]string{gwHTTP + " imports " + storetest + ": a service imports testkit only in its tests"}},
		{"pkg on a service", Package{ImportPath: phone, XTestImports: []string{gwHTTP}},
			[]string{phone + " imports " + gwHTTP + " (in its tests): pkg never imports a service"}},
		{"pkg's code on testkit", Package{ImportPath: phone, Imports: []string{storetest}},
			[]string{phone + " imports " + storetest + ": pkg imports testkit only in its tests"}},
		{"testkit on a service", Package{ImportPath: storetest, Imports: []string{gwHTTP}},
			[]string{storetest + " imports " + gwHTTP + ": testkit never imports a service"}},
		{"testkit/system on a service", Package{ImportPath: loadtest, TestImports: []string{gwMain}},
			[]string{loadtest + " imports " + gwMain + " (in its tests): testkit never imports a service"}},
		{"testkit on testkit/system", Package{ImportPath: storetest, Imports: []string{loadtest}},
			[]string{storetest + " imports " + loadtest + ": nothing imports testkit/system"}},
		{"pkg's tests on testkit/system", Package{ImportPath: phone, TestImports: []string{loadtest}},
			[]string{phone + " imports " + loadtest + " (in its tests): nothing imports testkit/system"}},
	} {
		got := Check([]Package{c.pkg})
		if len(got) != len(c.want) {
			t.Errorf("%s: %v, want %d violations", c.name, got, len(c.want))
			continue
		}
		for i, v := range got {
			if !strings.HasPrefix(v.String(), c.want[i]) {
				t.Errorf("%s: %q, want it to start %q", c.name, v, c.want[i])
			}
		}
	}
}

// The chain names how a tool reaches a program, shortest first.
func TestToolsInBinaries(t *testing.T) {
	pkgs := []Package{
		{ImportPath: gwMain, Name: "main", Imports: []string{gwHTTP, "fmt"}},
		{ImportPath: gwHTTP, Name: "httpapi", Imports: []string{phone, storetest}},
		{ImportPath: phone, Name: "phone", Imports: []string{"github.com/nats-io/nats-server/v2/server"}},
		{ImportPath: storetest, Name: "storetest", Imports: []string{phone}},
		{ImportPath: "github.com/nats-io/nats-server/v2/server", Name: "server"},
		{ImportPath: Module + "/services/admin/cmd/parleyctl", Name: "main", Imports: []string{"fmt"}},
	}
	got := ToolsInBinaries(pkgs)
	want := []string{
		gwMain + " depends on " + storetest + " (" + gwMain + " -> " + gwHTTP + " -> " + storetest + ")",
		gwMain + " depends on github.com/nats-io/nats-server/v2/server (" + gwMain + " -> " + gwHTTP + " -> " + phone + " -> github.com/nats-io/nats-server/v2/server)",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("ToolsInBinaries:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// No service's program (each main package of services/*, parleyctl
// included) depends on nats-server, docker compose, chromedp or testkit:
// they are for tests and operations, not for what runs in production.
func TestServiceProgramsLeaveOutTools(t *testing.T) {
	root, err := serviceproc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	mods, err := Modules(root)
	if err != nil {
		t.Fatal(err)
	}
	services := 0
	for _, dir := range mods {
		rel, _ := filepath.Rel(root, dir)
		if !strings.HasPrefix(rel, "services"+string(filepath.Separator)) {
			continue
		}
		services++
		pkgs, err := List(dir, "-deps", "./...")
		if err != nil {
			t.Fatal(err)
		}
		// Each service has a program at least: a listing that found none
		// would pass whatever the programs import.
		if !slices.ContainsFunc(pkgs, func(p Package) bool {
			return p.Name == "main" && strings.HasPrefix(p.ImportPath, Module+"/"+filepath.ToSlash(rel))
		}) {
			t.Errorf("%s: no main package", rel)
		}
		for _, bad := range ToolsInBinaries(pkgs) {
			t.Error(bad)
		}
	}
	if services == 0 {
		t.Fatal("no service module in the workspace")
	}
}
