// Package config reads the webhook sender's configuration from the
// environment, once. The defaults are the loopback servers of a developer
// machine.
package config

import (
	"errors"
	"time"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/envconfig"
	"github.com/parleyhq/parley/pkg/ops"
	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/pkg/store"
	"github.com/parleyhq/parley/pkg/webhooks"
	"github.com/parleyhq/parley/services/webhook-sender/internal/sender"
)

// Config is everything the webhook sender can be told.
type Config struct {
	// Addr serves /healthz, /readyz and /metrics.
	Addr string `env:"PARLEY_WEBHOOK_SENDER_ADDR" envDefault:":8086"`
	// DrainDelay is how long /readyz reports 503 before the listener closes.
	DrainDelay time.Duration `env:"PARLEY_DRAIN_DELAY" envDefault:"0s"`

	Log      ops.LogConfig
	Postgres store.Config
	NATS     bus.Config
	// Token opens the endpoints' signing secrets.
	Token    secretbox.Config
	Webhooks webhooks.Config
	Sender   sender.Config
}

// Load reads and validates the configuration.
func Load() (Config, error) { return envconfig.Load[Config]() }

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Addr == "" {
		errs = append(errs, errors.New("PARLEY_WEBHOOK_SENDER_ADDR is empty"))
	}
	if c.DrainDelay < 0 {
		errs = append(errs, errors.New("PARLEY_DRAIN_DELAY must not be negative"))
	}
	return errors.Join(append(errs, c.Log.Validate(), c.Postgres.Validate(), c.NATS.Validate(), c.Token.Validate(),
		c.Webhooks.Validate(), c.Sender.Validate())...)
}
