// Package config reads the campaign dispatcher's configuration from the environment,
// once. The defaults are the loopback servers of a developer machine.
package config

import (
	"errors"

	"github.com/parleyhq/parley/pkg/delivery/dispatchsvc"
	"github.com/parleyhq/parley/pkg/envconfig"
)

// Config is everything the campaign dispatcher can be told: its listen
// address, and what both dispatchers read (dispatchsvc.Config).
type Config struct {
	// Addr serves /healthz, /readyz and /metrics.
	Addr string `env:"PARLEY_CAMPAIGN_DISPATCHER_ADDR" envDefault:":8082"`

	dispatchsvc.Config
}

// Load reads and validates the configuration.
func Load() (Config, error) { return envconfig.Load[Config]() }

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Addr == "" {
		errs = append(errs, errors.New("PARLEY_CAMPAIGN_DISPATCHER_ADDR is empty"))
	}
	return errors.Join(append(errs, c.Config.Validate())...)
}
