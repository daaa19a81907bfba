package envdoc

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

type inner struct {
	URL string `env:"PARLEY_X_URL" envDefault:"nats://127.0.0.1:4222"`
}

type logConfig struct {
	Level string `env:"LEVEL,notEmpty" envDefault:"info"`
}

type config struct {
	Addr    string        `env:"PARLEY_X_ADDR" envDefault:":8080"`
	Timeout time.Duration `env:"PARLEY_X_TIMEOUT" envDefault:"50ms"`
	Secret  string        `env:"PARLEY_X_SECRET,required"`
	Empty   string        `env:"PARLEY_X_EMPTY" envDefault:""`
	Inner   inner
	Ptr     *inner     `envPrefix:"P_"`
	Log     *logConfig `envPrefix:"PARLEY_X_"`
	Since   time.Time
	skipped string `env:"PARLEY_HIDDEN"` // unexported fields are not read
	Skip    string `env:"-"`
	Plain   int
}

func TestVars(t *testing.T) {
	_ = config{}.skipped
	got := Vars(&config{})
	want := []Var{
		{Name: "PARLEY_X_ADDR", Default: ":8080", HasDefault: true, Field: "Addr"},
		{Name: "PARLEY_X_TIMEOUT", Default: "50ms", HasDefault: true, Field: "Timeout"},
		{Name: "PARLEY_X_SECRET", Required: true, Field: "Secret"},
		{Name: "PARLEY_X_EMPTY", HasDefault: true, Field: "Empty"},
		{Name: "PARLEY_X_URL", Default: "nats://127.0.0.1:4222", HasDefault: true, Field: "Inner.URL"},
		{Name: "P_PARLEY_X_URL", Default: "nats://127.0.0.1:4222", HasDefault: true, Field: "Ptr.URL"},
		{Name: "PARLEY_X_LEVEL", Default: "info", HasDefault: true, Required: true, Field: "Log.Level"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Vars =\n%+v\nwant\n%+v", got, want)
	}
	if !slices.Equal(Vars(config{}), want) {
		t.Fatal("Vars of a struct value differs from Vars of a pointer to it")
	}
	for _, notStruct := range []any{nil, 3, new(int), "PARLEY_X"} {
		if got := Vars(notStruct); got != nil {
			t.Errorf("Vars(%#v) = %v, want nil", notStruct, got)
		}
	}
}

func TestUndocumented(t *testing.T) {
	vars := []Var{{Name: "PARLEY_A", Default: ":8080"}, {Name: "PARLEY_B"}, {Name: "PARLEY_C", Default: "1s"}}
	doc := "| Variable | Default |\n|---|---|\n| `PARLEY_A` | `:8080` | the address |\n| `PARLEY_B` | (none) | a secret |\n| `PARLEY_C` | `2s` | stale |\n"
	got := Undocumented(doc, vars)
	if len(got) != 1 || got[0].Name != "PARLEY_C" {
		t.Fatalf("Undocumented = %v, want only PARLEY_C (its default differs)", got)
	}
	if got := Undocumented("| `PARLEY_AB` | `:8080` |", vars[:1]); len(got) != 1 {
		t.Fatal("a longer name documented PARLEY_A")
	}
}

// recorder is a testing.TB that keeps what CheckREADME reports.
type recorder struct {
	testing.TB
	errors, fatals []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, a ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, a...))
}

func (r *recorder) Fatalf(format string, a ...any) {
	r.fatals = append(r.fatals, fmt.Sprintf(format, a...))
}

func TestCheckREADME(t *testing.T) {
	type cfg struct {
		A string `env:"PARLEY_A" envDefault:":8080"`
		B string `env:"PARLEY_B"`
	}
	readme := filepath.Join(t.TempDir(), "README.md")
	write := func(doc string) {
		if err := os.WriteFile(readme, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	write("| Variable | Default |\n|---|---|\n| `PARLEY_A` | `:8080` | the address |\n| `PARLEY_B` | (none) | a secret |\n")
	r := &recorder{TB: t}
	CheckREADME(r, readme, cfg{})
	if len(r.errors)+len(r.fatals) != 0 {
		t.Fatalf("a complete table: %v %v", r.errors, r.fatals)
	}

	write("| Variable | Default |\n|---|---|\n| `PARLEY_A` | `:9090` | the address |\n")
	r = &recorder{TB: t}
	CheckREADME(r, readme, cfg{})
	want := []string{
		"README.md's configuration table lacks the row | `PARLEY_A` | `:8080` | ... (or gives another default)",
		"README.md's configuration table lacks the row | `PARLEY_B` | (none) | ... (or gives another default)",
	}
	if !slices.Equal(r.errors, want) || len(r.fatals) != 0 {
		t.Fatalf("a stale table: errors %q, fatals %q; want %q", r.errors, r.fatals, want)
	}

	for name, call := range map[string]func(*recorder){
		"no file":      func(r *recorder) { CheckREADME(r, filepath.Join(t.TempDir(), "nothing.md"), cfg{}) },
		"no variables": func(r *recorder) { CheckREADME(r, readme, struct{ X int }{}) },
	} {
		r := &recorder{TB: t}
		call(r)
		if len(r.fatals) != 1 || len(r.errors) != 0 {
			t.Errorf("%s: fatals %q, errors %q; want one fatal", name, r.fatals, r.errors)
		} else if name == "no variables" && !strings.Contains(r.fatals[0], "reads no environment variable") {
			t.Errorf("%s: %q", name, r.fatals[0])
		}
	}
}
