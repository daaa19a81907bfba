// Package envdoc lists the environment variables a configuration struct
// reads (its caarlos0/env `env` and `envDefault` tags, nested structs
// included), so that each service's tests can hold the README's
// configuration table to the code.
package envdoc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
)

// Var is one environment variable that a configuration struct reads, as
// caarlos0/env sees it.
type Var struct {
	Name string
	// Default is the envDefault tag; HasDefault tells an empty default from
	// none.
	Default    string
	HasDefault bool
	// Required is set by the required or notEmpty options.
	Required bool
	// Field is the Go path of the field, such as Postgres.URL.
	Field string
}

// Vars returns the variables cfg (a struct or a pointer to one) reads, in
// field order: its env tags and those of nested structs such as
// store.Config, with envPrefix applied as caarlos0/env applies it. It is
// nil for anything but a struct.
func Vars(cfg any) []Var {
	t := reflect.TypeOf(cfg)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var out []Var
	walk(t, "", "", &out)
	return out
}

func walk(t reflect.Type, prefix, path string, out *[]Var) {
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		field := f.Name
		if path != "" {
			field = path + "." + f.Name
		}
		tag, hasTag := f.Tag.Lookup("env")
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		// caarlos0/env descends into a struct field without a variable name
		// (time.Time has no exported fields, so it adds nothing).
		if name == "" && ft.Kind() == reflect.Struct {
			walk(ft, prefix+f.Tag.Get("envPrefix"), field, out)
			continue
		}
		if !hasTag || name == "" || name == "-" {
			continue
		}
		def, hasDef := f.Tag.Lookup("envDefault")
		v := Var{Name: prefix + name, Default: def, HasDefault: hasDef, Field: field}
		for _, o := range strings.Split(opts, ",") {
			if o == "required" || o == "notEmpty" {
				v.Required = true
			}
		}
		*out = append(*out, v)
	}
}

// NoDefault is how a table shows a variable without a default.
const NoDefault = "(none)"

// Row is the start of the table row that documents v:
// | `NAME` | `default` |   or   | `NAME` | (none) |
func Row(v Var) string {
	def := NoDefault
	if v.Default != "" {
		def = "`" + v.Default + "`"
	}
	return fmt.Sprintf("| `%s` | %s |", v.Name, def)
}

// Undocumented returns the variables whose row (Row) doc lacks: missing,
// or documented with another default.
func Undocumented(doc string, vars []Var) []Var {
	var missing []Var
	for _, v := range vars {
		if !strings.Contains(doc, "\n"+Row(v)) {
			missing = append(missing, v)
		}
	}
	return missing
}

// CheckREADME returns an error naming every variable cfg reads that the
// document at readmePath (a service test passes the repository's README.md)
// does not document in its configuration table with the same default
// (Undocumented), one line each. A cfg that reads no variable is an error
// too: the check would pass whatever the document says. The caller's test
// reports the error, so that this package stays free of package testing.
func CheckREADME(readmePath string, cfg any) error {
	doc, err := os.ReadFile(readmePath)
	if err != nil {
		return fmt.Errorf("read the documentation: %w", err)
	}
	vars := Vars(cfg)
	if len(vars) == 0 {
		return fmt.Errorf("%T reads no environment variable: nothing to hold %s to", cfg, readmePath)
	}
	var errs []error
	for _, v := range Undocumented(string(doc), vars) {
		errs = append(errs, fmt.Errorf("%s's configuration table lacks the row %s ... (or gives another default)", filepath.Base(readmePath), Row(v)))
	}
	return errors.Join(errs...)
}
