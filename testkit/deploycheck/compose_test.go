package deploycheck

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/envdoc"
	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/store"
)

// widgetConfig is a configuration shaped like the services' own: flat
// fields, nested shared structs, a prefixed struct and a required variable.
type widgetConfig struct {
	Addr     string        `env:"PARLEY_WIDGET_ADDR" envDefault:":8080"`
	Gadget   string        `env:"PARLEY_GADGET_ADDR" envDefault:":8080"`
	Token    string        `env:"PARLEY_WIDGET_TOKEN,required"`
	Drain    time.Duration `env:"PARLEY_DRAIN_DELAY" envDefault:"0s"`
	Postgres store.Config
	Redis    ratelimit.RedisConfig
	Upstream struct {
		URL string `env:"URL" envDefault:"https://graph.example.com"`
	} `envPrefix:"PARLEY_UPSTREAM_"`
}

func TestCheckService(t *testing.T) {
	c, err := LoadCompose(context.Background(), "testdata/compose/docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		service string
		cfg     any
		want    []string // one problem containing each, and no other
	}{
		{"good", widgetConfig{}, nil},
		{"once", store.Config{}, nil},
		{"missing", widgetConfig{}, []string{`not in`}},
		{"once-bad", store.Config{}, []string{
			"runs once (others wait for it to complete) but opens ports",
			`runs once but has restart "always"`,
		}},
		{"env-mistakes", widgetConfig{}, []string{
			"sets PARLEY_WIDGET_TOKN, which deploycheck.widgetConfig does not read",
			"does not set PARLEY_WIDGET_TOKEN, which deploycheck.widgetConfig requires",
			`does not set PARLEY_POSTGRES_URL, whose default "postgres://postgres@127.0.0.1:5432/parley?sslmode=disable" is loopback`,
			`sets PARLEY_REDIS_ADDR="127.0.0.1:6379": loopback inside a container`,
			`PARLEY_UPSTREAM_URL points at "upstreem", which is no service of this file`,
		}},
		{"dependency-mistakes", widgetConfig{}, []string{
			`depends on "postgres" with condition "service_started"`,
			`PARLEY_REDIS_ADDR points at "redis", which it does not depend_on`,
			"uses postgres, which once prepares: depend on once with condition service_completed_successfully",
		}},
		{"port-mistakes", widgetConfig{}, []string{
			"publishes container port 8080, but it listens on 8081 (PARLEY_WIDGET_ADDR)",
			"exposes port 8082, but it listens on 8081",
			`the Dockerfile stage "widget" does not EXPOSE 8081`,
			`healthcheck URL "http://redis:8080/health": a healthcheck runs inside the container`,
			`healthcheck URL "http://redis:8080/health": the service listens on port 8081`,
			`healthcheck URL "http://redis:8080/health": the service does not answer "/health"`,
		}},
		{"no-ports", widgetConfig{}, []string{
			"neither publishes nor exposes port 8080",
			`healthcheck ["CMD-SHELL" "curl -f http://127.0.0.1:8080/readyz"]: want [CMD /usr/local/bin/healthcheck`,
		}},
		{"no-healthcheck", widgetConfig{}, []string{"has no healthcheck"}},
		{"short-grace", widgetConfig{}, []string{
			"stop_grace_period 30s is shorter than PARLEY_DRAIN_DELAY 15s plus the shutdown timeout 20s",
		}},
		{"gadget", widgetConfig{}, []string{
			`the Dockerfile stage "gadget" does not EXPOSE 8080`,
			`the Dockerfile stage "gadget" does not install /usr/local/bin/healthcheck`,
		}},
		{"no-build", widgetConfig{}, []string{
			"has no build target",
			"uses postgres, which once prepares",
			`PARLEY_POSTGRES_URL points at "postgres", which it does not depend_on`,
			`PARLEY_REDIS_ADDR points at "redis", which it does not depend_on`,
		}},
		{"good", store.Config{}, []string{
			"sets PARLEY_WIDGET_TOKEN, which store.Config does not read",
			"sets PARLEY_REDIS_ADDR, which store.Config does not read",
			"store.Config has no PARLEY_WIDGET_ADDR",
		}},
		{"good", 42, []string{"int is no configuration struct"}},
	}
	for _, tt := range tests {
		t.Run(tt.service, func(t *testing.T) {
			assertProblems(t, c.CheckService(tt.service, tt.cfg), tt.want)
		})
	}
}

// assertProblems wants exactly one problem per wanted fragment.
func assertProblems(t *testing.T, got []error, want []string) {
	t.Helper()
	used := make([]bool, len(got))
	for _, w := range want {
		found := false
		for i, err := range got {
			if !used[i] && strings.Contains(err.Error(), w) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			t.Errorf("no problem containing %q", w)
		}
	}
	for i, err := range got {
		if !used[i] {
			t.Errorf("unexpected problem: %v", err)
		}
	}
}

// The walk is envdoc's (tested there); here: the prefixes and nesting of
// a service-shaped configuration, and the refusal of a struct that reads
// nothing, which would make every check pass.
func TestConfigVars(t *testing.T) {
	got, err := configVars(&widgetConfig{})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]envdoc.Var{}
	for _, v := range got {
		names[v.Name] = v
	}
	for name, field := range map[string]string{
		"PARLEY_WIDGET_TOKEN": "Token", "PARLEY_POSTGRES_URL": "Postgres.URL", "PARLEY_UPSTREAM_URL": "Upstream.URL",
	} {
		if v, ok := names[name]; !ok || v.Field != field {
			t.Errorf("configVars lacks %s (field %s): %+v", name, field, got)
		}
	}
	if !names["PARLEY_WIDGET_TOKEN"].Required || names["PARLEY_WIDGET_TOKEN"].HasDefault {
		t.Errorf("PARLEY_WIDGET_TOKEN = %+v, want required without default", names["PARLEY_WIDGET_TOKEN"])
	}
	for _, nothing := range []any{struct{ A int }{}, 7, nil} {
		if _, err := configVars(nothing); err == nil {
			t.Errorf("configVars(%#v): want an error", nothing)
		}
	}
}

func TestHostOf(t *testing.T) {
	tests := []struct {
		value, host  string
		ok, loopback bool
	}{
		{"postgres://u:p@postgres:5432/db?sslmode=disable", "postgres", true, false},
		{"nats://127.0.0.1:4222", "127.0.0.1", true, true},
		{"http://localhost:9090", "localhost", true, true},
		{"http://[::1]:9090", "::1", true, true},
		{"redis:6379", "redis", true, false},
		{"127.0.0.2:6379", "127.0.0.2", true, true},
		{":8080", "", false, false},
		{"50ms", "", false, false},
		{"SENDS", "", false, false},
	}
	for _, tt := range tests {
		host, ok := hostOf(tt.value)
		if host != tt.host || ok != tt.ok || (ok && isLoopback(host) != tt.loopback) {
			t.Errorf("hostOf(%q) = %q, %v (loopback %v); want %q, %v (loopback %v)", tt.value, host, ok, isLoopback(host), tt.host, tt.ok, tt.loopback)
		}
	}
}

func TestParseDockerfile(t *testing.T) {
	df, err := ParseDockerfile("testdata/compose/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(df.Stages); n != 4 {
		t.Fatalf("%d stages, want 4", n)
	}
	if chain := df.Chain("widget"); len(chain) != 2 || chain[1].Name != "runtime" {
		t.Errorf("Chain(widget) = %v, want widget, runtime", chain)
	}
	if !df.Copies("widget", "", HealthcheckBinary) || df.Copies("gadget", "", HealthcheckBinary) {
		t.Error("Copies: the healthcheck is in widget (through runtime) and not in gadget")
	}
	in, ok := df.Find("widget", "ENTRYPOINT")
	argv, err := in.ExecForm()
	if !ok || err != nil || len(argv) != 1 || argv[0] != "/usr/local/bin/widget" {
		t.Errorf("widget ENTRYPOINT = %q, %v", argv, err)
	}
}
