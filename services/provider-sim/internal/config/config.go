// Package config reads provider-sim's configuration from the environment, once.
package config

import (
	"errors"
	"fmt"

	"github.com/caarlos0/env/v11"

	"github.com/parleyhq/parley/pkg/ops"
)

// Config is everything provider-sim can be told.
type Config struct {
	Addr string `env:"PARLEY_PROVIDER_SIM_ADDR" envDefault:":9090"`
	Log  ops.LogConfig
}

// Load reads and validates the configuration.
func Load() (Config, error) {
	cfg, err := env.ParseAs[Config]()
	if err != nil {
		return Config{}, fmt.Errorf("read configuration: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("invalid configuration:\n%w", err)
	}
	return cfg, nil
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Addr == "" {
		errs = append(errs, errors.New("PARLEY_PROVIDER_SIM_ADDR is empty"))
	}
	return errors.Join(append(errs, c.Log.Validate())...)
}
