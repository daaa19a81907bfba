package envdoc

import (
	"slices"
	"testing"
	"time"
)

type inner struct {
	URL string `env:"PARLEY_X_URL" envDefault:"nats://127.0.0.1:4222"`
}

type config struct {
	Addr    string        `env:"PARLEY_X_ADDR" envDefault:":8080"`
	Timeout time.Duration `env:"PARLEY_X_TIMEOUT" envDefault:"50ms"`
	Secret  string        `env:"PARLEY_X_SECRET,required"`
	Inner   inner
	Ptr     *inner `envPrefix:"P_"`
	skipped string //nolint:unused // unexported fields are not read
	Plain   int
}

func TestVars(t *testing.T) {
	got := Vars(&config{})
	want := []Var{
		{"PARLEY_X_ADDR", ":8080"},
		{"PARLEY_X_TIMEOUT", "50ms"},
		{"PARLEY_X_SECRET", ""},
		{"PARLEY_X_URL", "nats://127.0.0.1:4222"},
		{"P_PARLEY_X_URL", "nats://127.0.0.1:4222"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Vars = %v, want %v", got, want)
	}
}

func TestUndocumented(t *testing.T) {
	vars := []Var{{"PARLEY_A", ":8080"}, {"PARLEY_B", ""}, {"PARLEY_C", "1s"}}
	doc := "| Variable | Default |\n|---|---|\n| `PARLEY_A` | `:8080` | the address |\n| `PARLEY_B` | (none) | a secret |\n| `PARLEY_C` | `2s` | stale |\n"
	got := Undocumented(doc, vars)
	if len(got) != 1 || got[0].Name != "PARLEY_C" {
		t.Fatalf("Undocumented = %v, want only PARLEY_C (its default differs)", got)
	}
	if got := Undocumented("| `PARLEY_AB` | `:8080` |", vars[:1]); len(got) != 1 {
		t.Fatal("a longer name documented PARLEY_A")
	}
}
