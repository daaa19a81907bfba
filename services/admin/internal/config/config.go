// Package config reads the admin service's configuration from the environment,
// once. The defaults are the loopback servers of a developer machine.
package config

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/envconfig"
	"github.com/parleyhq/parley/pkg/ops"
	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/pkg/store"
	"github.com/parleyhq/parley/pkg/webhooks"
)

// Config is everything the admin service can be told.
type Config struct {
	Addr string `env:"PARLEY_ADMIN_ADDR" envDefault:":8081"`
	// DrainDelay is how long /readyz reports 503 before the listener closes.
	DrainDelay time.Duration `env:"PARLEY_DRAIN_DELAY" envDefault:"0s"`

	// AdminToken is the operators' bearer token for the admin JSON API
	// (/admin/api/). Unset, the API answers 503 and only the console works.
	AdminToken string `env:"PARLEY_ADMIN_TOKEN"`

	Console  Console
	Log      ops.LogConfig
	Postgres store.Config
	NATS     bus.Config
	// Token is the key that seals webhook signing secrets (PARLEY_TOKEN_KEY,
	// the same key the dispatchers and parleyctl use).
	Token secretbox.Config
	// Webhooks are the endpoint rules (PARLEY_WEBHOOKS_*).
	Webhooks webhooks.Config
	// Provider is the WhatsApp Cloud API (PARLEY_WHATSAPP_*), where
	// templates created through the API and the console are submitted.
	Provider whatsapp.ProviderConfig
}

// Console is the sign-in and session part of the configuration.
type Console struct {
	// CookieSecure marks the session cookie Secure (and names it with the
	// __Host- prefix). Turn it on whenever the console is served over TLS,
	// which is everywhere but a developer's loopback.
	CookieSecure bool `env:"PARLEY_ADMIN_COOKIE_SECURE" envDefault:"false"`
	// SessionLifetime is the longest a sign-in lasts; SessionIdleTimeout ends
	// it sooner when the user does nothing.
	SessionLifetime    time.Duration `env:"PARLEY_ADMIN_SESSION_LIFETIME" envDefault:"12h"`
	SessionIdleTimeout time.Duration `env:"PARLEY_ADMIN_SESSION_IDLE_TIMEOUT" envDefault:"2h"`
	// TrustedOrigins are other origins (scheme://host[:port]) whose forms may
	// post to the console, for example when a proxy serves it under another
	// name than the Host header it forwards. Empty: same origin only.
	TrustedOrigins []string `env:"PARLEY_ADMIN_TRUSTED_ORIGINS" envSeparator:","`
	// TrustForwardedFor takes the client address for sign-in throttling from
	// the last X-Forwarded-For entry (the one the proxy in front appended).
	// Only set it behind such a proxy: otherwise clients choose their address.
	TrustForwardedFor bool `env:"PARLEY_ADMIN_TRUST_FORWARDED_FOR" envDefault:"false"`
	// Sign-in throttling: failures allowed within the window per email
	// address and per client network before sign-in is refused.
	LoginMaxFailuresPerEmail int           `env:"PARLEY_ADMIN_LOGIN_MAX_FAILURES_PER_EMAIL" envDefault:"5"`
	LoginMaxFailuresPerIP    int           `env:"PARLEY_ADMIN_LOGIN_MAX_FAILURES_PER_IP" envDefault:"20"`
	LoginFailureWindow       time.Duration `env:"PARLEY_ADMIN_LOGIN_FAILURE_WINDOW" envDefault:"15m"`
}

// MinAdminTokenLen keeps the operator token out of guessing range.
const MinAdminTokenLen = 32

// Load reads and validates the configuration.
func Load() (Config, error) { return envconfig.Load[Config]() }

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Addr == "" {
		errs = append(errs, errors.New("PARLEY_ADMIN_ADDR is empty"))
	}
	if c.DrainDelay < 0 {
		errs = append(errs, errors.New("PARLEY_DRAIN_DELAY must not be negative"))
	}
	if c.AdminToken != "" && len(c.AdminToken) < MinAdminTokenLen {
		errs = append(errs, fmt.Errorf("PARLEY_ADMIN_TOKEN must be at least %d characters (for example `openssl rand -hex 32`)", MinAdminTokenLen))
	}
	return errors.Join(append(errs, c.Console.Validate(), c.Log.Validate(), c.Postgres.Validate(), c.NATS.Validate(), c.Token.Validate(), c.Webhooks.Validate(),
		c.Provider.Validate())...)
}

// Validate reports every problem with the console configuration.
func (c Console) Validate() error {
	var errs []error
	if c.SessionLifetime <= 0 {
		errs = append(errs, errors.New("PARLEY_ADMIN_SESSION_LIFETIME must be positive"))
	}
	if c.SessionIdleTimeout <= 0 || c.SessionIdleTimeout > c.SessionLifetime {
		errs = append(errs, errors.New("PARLEY_ADMIN_SESSION_IDLE_TIMEOUT must be positive and at most PARLEY_ADMIN_SESSION_LIFETIME"))
	}
	for _, o := range c.TrustedOrigins {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			errs = append(errs, fmt.Errorf("PARLEY_ADMIN_TRUSTED_ORIGINS: %q is not scheme://host[:port]", o))
		}
	}
	if c.LoginMaxFailuresPerEmail < 1 {
		errs = append(errs, errors.New("PARLEY_ADMIN_LOGIN_MAX_FAILURES_PER_EMAIL must be at least 1"))
	}
	if c.LoginMaxFailuresPerIP < 1 {
		errs = append(errs, errors.New("PARLEY_ADMIN_LOGIN_MAX_FAILURES_PER_IP must be at least 1"))
	}
	if c.LoginFailureWindow <= 0 {
		errs = append(errs, errors.New("PARLEY_ADMIN_LOGIN_FAILURE_WINDOW must be positive"))
	}
	return errors.Join(errs...)
}
