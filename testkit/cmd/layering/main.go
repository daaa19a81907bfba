// layering checks the imports of every package of the workspace, tests and
// the drill and bench files included, against Parley's layers
// (testkit/layering): make lint runs it from the repository's root or any
// folder under it. It prints each broken rule, naming the importing package
// and the import, and exits 1 if there is one.
package main

import (
	"fmt"
	"os"

	"github.com/parleyhq/parley/testkit/layering"
	"github.com/parleyhq/parley/testkit/serviceproc"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "layering:", err)
		os.Exit(1)
	}
}

func run() error {
	root, err := serviceproc.RepoRoot()
	if err != nil {
		return err
	}
	mods, err := layering.Modules(root)
	if err != nil {
		return err
	}
	var pkgs []layering.Package
	for _, dir := range mods {
		// The drill and bench tags add their files; no file is left out by
		// them (none is built only without a tag).
		p, err := layering.List(dir, "-tags", "drill,bench", "./...")
		if err != nil {
			return err
		}
		pkgs = append(pkgs, p...)
	}
	bad := layering.Check(pkgs)
	for _, v := range bad {
		fmt.Println(v)
	}
	if len(bad) > 0 {
		return fmt.Errorf("%d imports break the layers (pkg < services, pkg < testkit < testkit/system; testkit only in tests)", len(bad))
	}
	fmt.Printf("layering: %d packages of %d modules keep to their layers\n", len(pkgs), len(mods))
	return nil
}
