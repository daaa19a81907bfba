package envconfig_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/envconfig"
)

var errTimeout = errors.New("PARLEY_ENVCONFIG_TEST_TIMEOUT must be positive")

type config struct {
	Name    string        `env:"PARLEY_ENVCONFIG_TEST_NAME" envDefault:"parley"`
	Timeout time.Duration `env:"PARLEY_ENVCONFIG_TEST_TIMEOUT" envDefault:"2s"`
}

func (c config) Validate() error {
	if c.Timeout <= 0 {
		return errTimeout
	}
	return nil
}

func TestLoad(t *testing.T) {
	t.Setenv("PARLEY_ENVCONFIG_TEST_TIMEOUT", "5s")
	cfg, err := envconfig.Load[config]()
	if err != nil || cfg != (config{Name: "parley", Timeout: 5 * time.Second}) {
		t.Fatalf("Load = %+v, %v; want the default name and the environment's timeout", cfg, err)
	}

	t.Setenv("PARLEY_ENVCONFIG_TEST_TIMEOUT", "0s")
	_, err = envconfig.Load[config]()
	if !errors.Is(err, errTimeout) || !strings.HasPrefix(err.Error(), "invalid configuration:\n") {
		t.Fatalf("a zero timeout: %v, want the Validate error under \"invalid configuration\"", err)
	}

	t.Setenv("PARLEY_ENVCONFIG_TEST_TIMEOUT", "soon")
	if _, err := envconfig.Load[config](); err == nil || !strings.HasPrefix(err.Error(), "read configuration: ") ||
		!strings.Contains(err.Error(), `"soon"`) {
		t.Fatalf("an unparsable duration: %v, want a read error quoting the value", err)
	}
}

func TestLoadEnviron(t *testing.T) {
	// The process's environment does not count.
	t.Setenv("PARLEY_ENVCONFIG_TEST_NAME", "other")
	cfg, err := envconfig.LoadEnviron[config](nil)
	if err != nil || cfg != (config{Name: "parley", Timeout: 2 * time.Second}) {
		t.Fatalf("LoadEnviron(nil) = %+v, %v; want the defaults", cfg, err)
	}
	cfg, err = envconfig.LoadEnviron[config]([]string{"PARLEY_ENVCONFIG_TEST_NAME=acme", "PARLEY_ENVCONFIG_TEST_TIMEOUT=1m"})
	if err != nil || cfg != (config{Name: "acme", Timeout: time.Minute}) {
		t.Fatalf("LoadEnviron = %+v, %v", cfg, err)
	}
	if _, err := envconfig.LoadEnviron[config]([]string{"PARLEY_ENVCONFIG_TEST_TIMEOUT=-1s"}); !errors.Is(err, errTimeout) {
		t.Fatalf("a negative timeout: %v", err)
	}
}
