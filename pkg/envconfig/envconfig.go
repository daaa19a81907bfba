// Package envconfig reads a Parley program's configuration from the
// environment, once, into its typed struct (caarlos0/env tags: `env`,
// `envDefault`, nested structs) and validates it, so that every program
// reports a bad setting the same way. The structs themselves stay in each
// service's internal/config, which alone reads the environment.
package envconfig

import (
	"fmt"

	"github.com/caarlos0/env/v11"
)

// Validator is a configuration that reports every problem at once.
type Validator interface {
	Validate() error
}

// Load reads C from the process's environment and validates it.
func Load[C Validator]() (C, error) {
	return load[C](env.Options{})
}

// LoadEnviron is Load from environ (os.Environ's form) instead of the
// process's environment: nil or empty is an environment with no variable,
// where every default applies.
func LoadEnviron[C Validator](environ []string) (C, error) {
	return load[C](env.Options{Environment: env.ToMap(environ)})
}

func load[C Validator](opts env.Options) (C, error) {
	var zero C
	cfg, err := env.ParseAsWithOptions[C](opts)
	if err != nil {
		return zero, fmt.Errorf("read configuration: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return zero, fmt.Errorf("invalid configuration:\n%w", err)
	}
	return cfg, nil
}
