// Package config is each dispatcher command's environment, read once: its
// listen address, named for its lane, and what both commands read
// (dispatcher.Config). The defaults are the loopback servers of a developer
// machine.
package config

import (
	"errors"

	"github.com/parleyhq/parley/services/dispatcher"
)

// Campaign is everything cmd/campaign-dispatcher can be told.
type Campaign struct {
	// Addr serves /healthz, /readyz and /metrics.
	Addr string `env:"PARLEY_CAMPAIGN_DISPATCHER_ADDR" envDefault:":8082"`

	dispatcher.Config
}

// Automation is everything cmd/automation-dispatcher can be told.
type Automation struct {
	// Addr serves /healthz, /readyz and /metrics.
	Addr string `env:"PARLEY_AUTOMATION_DISPATCHER_ADDR" envDefault:":8083"`

	dispatcher.Config
}

// Listen is the campaign dispatcher's listen address.
func (c Campaign) Listen() string { return c.Addr }

// Shared is what the campaign dispatcher reads besides its address.
func (c Campaign) Shared() dispatcher.Config { return c.Config }

// Validate reports every problem at once.
func (c Campaign) Validate() error {
	return validate(c.Addr, "PARLEY_CAMPAIGN_DISPATCHER_ADDR", c.Config)
}

// Listen is the automation dispatcher's listen address.
func (c Automation) Listen() string { return c.Addr }

// Shared is what the automation dispatcher reads besides its address.
func (c Automation) Shared() dispatcher.Config { return c.Config }

// Validate reports every problem at once.
func (c Automation) Validate() error {
	return validate(c.Addr, "PARLEY_AUTOMATION_DISPATCHER_ADDR", c.Config)
}

func validate(addr, name string, shared dispatcher.Config) error {
	var errs []error
	if addr == "" {
		errs = append(errs, errors.New(name+" is empty"))
	}
	return errors.Join(append(errs, shared.Validate())...)
}
