// Package envdoc lists the environment variables a configuration struct
// reads (its caarlos0/env `env` and `envDefault` tags, nested structs
// included), so that each service's tests can hold the README's
// configuration table to the code.
package envdoc

import (
	"fmt"
	"reflect"
	"strings"
)

// Var is one environment variable and its default ("" when it has none).
type Var struct {
	Name    string
	Default string
}

// Vars returns the variables cfg (a struct or a pointer to one) reads, in
// field order.
func Vars(cfg any) []Var {
	t := reflect.TypeOf(cfg)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []Var
	walk(t, "", &out)
	return out
}

func walk(t reflect.Type, prefix string, out *[]Var) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if name == "" && ft.Kind() == reflect.Struct && ft.PkgPath() != "time" {
			walk(ft, prefix+f.Tag.Get("envPrefix"), out)
			continue
		}
		if name != "" {
			*out = append(*out, Var{Name: prefix + name, Default: f.Tag.Get("envDefault")})
		}
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
