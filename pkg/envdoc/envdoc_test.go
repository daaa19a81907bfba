package envdoc

import (
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
	if err := CheckREADME(readme, cfg{}); err != nil {
		t.Fatalf("a complete table: %v", err)
	}

	write("| Variable | Default |\n|---|---|\n| `PARLEY_A` | `:9090` | the address |\n")
	want := "README.md's configuration table lacks the row | `PARLEY_A` | `:8080` | ... (or gives another default)\n" +
		"README.md's configuration table lacks the row | `PARLEY_B` | (none) | ... (or gives another default)"
	if err := CheckREADME(readme, cfg{}); err == nil || err.Error() != want {
		t.Fatalf("a stale table: %v; want %q", err, want)
	}

	if err := CheckREADME(filepath.Join(t.TempDir(), "nothing.md"), cfg{}); err == nil || !strings.Contains(err.Error(), "read the documentation") {
		t.Errorf("no file: %v", err)
	}
	if err := CheckREADME(readme, struct{ X int }{}); err == nil || !strings.Contains(err.Error(), "reads no environment variable") {
		t.Errorf("no variables: %v", err)
	}
}
