package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/envconfig"
	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/pkg/store"
	"github.com/parleyhq/parley/pkg/webhooks"
)

// Config is everything parleyctl reads from the environment: the same
// PARLEY_* variables as the services, so that one environment file serves
// both, plus the demo account that seed provisions.
type Config struct {
	Postgres store.Config
	NATS     bus.Config
	Token    secretbox.Config
	// Webhooks are the endpoint rules webhooks create and update apply.
	Webhooks webhooks.Config
	// Provider is where `templates create --account` submits templates.
	Provider whatsapp.ProviderConfig

	// PublishTimeout bounds how long a change waits for NATS to take its
	// cache invalidation before warning and moving on.
	PublishTimeout time.Duration `env:"PARLEY_CLI_PUBLISH_TIMEOUT" envDefault:"3s"`

	// AccountAccessToken is the Bearer token `accounts create` stores when
	// neither --access-token nor --access-token-stdin is given, so that it
	// need not appear in the shell history or the process list.
	AccountAccessToken string `env:"PARLEY_ACCOUNT_ACCESS_TOKEN"`

	Demo DemoConfig
}

// DemoConfig is the messaging account seed connects. provider-sim must know
// the same pair (PARLEY_PROVIDER_SIM_ACCOUNTS="<phone_number_id>:<token>");
// deploy/local/run.sh passes both from these variables.
type DemoConfig struct {
	PhoneNumberID string `env:"PARLEY_DEMO_PHONE_NUMBER_ID" envDefault:"15550100001"`
	AccessToken   string `env:"PARLEY_DEMO_ACCESS_TOKEN" envDefault:"parley-demo-access-token"`
}

// LoadConfig reads the configuration from environ (os.Environ's form) and
// validates it.
func LoadConfig(environ []string) (Config, error) { return envconfig.LoadEnviron[Config](environ) }

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.PublishTimeout <= 0 {
		errs = append(errs, errors.New("PARLEY_CLI_PUBLISH_TIMEOUT must be positive"))
	}
	if !digitsRe.MatchString(c.Demo.PhoneNumberID) {
		errs = append(errs, fmt.Errorf("PARLEY_DEMO_PHONE_NUMBER_ID %q: digits only", c.Demo.PhoneNumberID))
	}
	if c.Demo.AccessToken == "" {
		errs = append(errs, errors.New("PARLEY_DEMO_ACCESS_TOKEN is empty"))
	}
	return errors.Join(append(errs, c.Postgres.Validate(), c.NATS.Validate(), c.Token.Validate(), c.Webhooks.Validate(), c.Provider.Validate())...)
}
