// Package config reads the gateway's configuration from the environment,
// once. The defaults are the loopback servers of a developer machine.
package config

import (
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/envconfig"
	"github.com/parleyhq/parley/pkg/ops"
	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/store"
)

// Config is everything the gateway can be told.
type Config struct {
	Addr string `env:"PARLEY_GATEWAY_ADDR" envDefault:":8080"`
	// DrainDelay is how long /readyz reports 503 before the listener closes.
	DrainDelay time.Duration `env:"PARLEY_DRAIN_DELAY" envDefault:"0s"`
	// MaxBodyBytes is the largest request body accepted; larger ones get 413.
	// 1 MiB holds 1000 automation contacts with generous variables.
	MaxBodyBytes int64 `env:"PARLEY_GATEWAY_MAX_BODY_BYTES" envDefault:"1048576"`
	// AccessLog logs one line per request; errors are logged regardless.
	AccessLog bool `env:"PARLEY_GATEWAY_ACCESS_LOG" envDefault:"true"`
	// CacheTTL bounds how long a key, campaign or automation lookup is
	// trusted when a change broadcast is lost.
	CacheTTL time.Duration `env:"PARLEY_GATEWAY_CACHE_TTL" envDefault:"5s"`
	// CacheStaleIfError is how much longer a cached entry serves while
	// PostgreSQL cannot be reached.
	CacheStaleIfError time.Duration `env:"PARLEY_GATEWAY_CACHE_STALE_IF_ERROR" envDefault:"60s"`
	// PublishTimeout bounds the wait for JetStream's acknowledgement.
	PublishTimeout time.Duration `env:"PARLEY_GATEWAY_PUBLISH_TIMEOUT" envDefault:"2s"`
	// PublishMaxPending caps unacknowledged asynchronous publishes.
	PublishMaxPending int `env:"PARLEY_GATEWAY_PUBLISH_MAX_PENDING" envDefault:"4096"`
	// GroupsInFlight is how many stream messages of one kind of batch may
	// await their acknowledgement at once; batches accepted meanwhile go
	// together in the next (the group commit, package accept). 1 makes the
	// largest groups; a lone request never waits for a group.
	GroupsInFlight int `env:"PARLEY_GATEWAY_GROUPS_IN_FLIGHT" envDefault:"2"`
	// GroupMaxBatches caps the batches of one stream message (it is also
	// capped by the server's max_payload).
	GroupMaxBatches int `env:"PARLEY_GATEWAY_GROUP_MAX_BATCHES" envDefault:"512"`
	// StatusGroupMax is the most status callbacks applied in one
	// transaction: the webhooks that arrive together are applied as a group
	// (the group commit of status callbacks, package statuses), each
	// answered once its group is committed. A webhook is never split.
	StatusGroupMax int `env:"PARLEY_GATEWAY_STATUS_GROUP_MAX" envDefault:"1000"`
	// StatusGroupWait is how long a group's first webhook waits for others
	// once an applier is free; 0 applies what has arrived at once.
	StatusGroupWait time.Duration `env:"PARLEY_GATEWAY_STATUS_GROUP_WAIT" envDefault:"10ms"`
	// StatusAppliers is how many groups are applied at once, each on a
	// PostgreSQL connection of the pool.
	// At most PARLEY_POSTGRES_MAX_CONNS - 1 run (EffectiveStatusAppliers),
	// so that a pool smaller than the default still serves requests.
	StatusAppliers int `env:"PARLEY_GATEWAY_STATUS_APPLIERS" envDefault:"4"`
	// IdempotencyRetention is how long an Idempotency-Key replays its 202.
	IdempotencyRetention time.Duration `env:"PARLEY_GATEWAY_IDEMPOTENCY_RETENTION" envDefault:"24h"`

	// GCPercent is the Go garbage collector's target (GOGC) for the
	// gateway: its live heap is small and its allocation rate high, so
	// collecting less often buys CPU for a little memory. -1 turns the
	// collector off (never do that in production).
	GCPercent int `env:"PARLEY_GATEWAY_GC_PERCENT" envDefault:"400"`
	// WebhookAppSecret is the Meta app secret that signs status callbacks
	// (X-Hub-Signature-256). The default suits provider-sim in make run only.
	WebhookAppSecret string `env:"PARLEY_WEBHOOK_APP_SECRET" envDefault:"parley-local-webhook-secret"`
	// WebhookVerifyToken answers the webhook subscription handshake.
	WebhookVerifyToken string `env:"PARLEY_WEBHOOK_VERIFY_TOKEN" envDefault:"parley-local-verify-token"`

	Log      ops.LogConfig
	Postgres store.Config
	Redis    ratelimit.RedisConfig
	NATS     bus.Config
}

// Load reads and validates the configuration.
func Load() (Config, error) { return envconfig.Load[Config]() }

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Addr == "" {
		errs = append(errs, errors.New("PARLEY_GATEWAY_ADDR is empty"))
	}
	if c.DrainDelay < 0 {
		errs = append(errs, errors.New("PARLEY_DRAIN_DELAY must not be negative"))
	}
	if c.MaxBodyBytes < 1024 {
		errs = append(errs, errors.New("PARLEY_GATEWAY_MAX_BODY_BYTES must be at least 1024"))
	}
	if c.CacheTTL <= 0 {
		errs = append(errs, errors.New("PARLEY_GATEWAY_CACHE_TTL must be positive"))
	}
	if c.CacheStaleIfError < 0 {
		errs = append(errs, errors.New("PARLEY_GATEWAY_CACHE_STALE_IF_ERROR must not be negative"))
	}
	if c.PublishTimeout <= 0 {
		errs = append(errs, errors.New("PARLEY_GATEWAY_PUBLISH_TIMEOUT must be positive"))
	}
	if c.PublishMaxPending < 1 {
		errs = append(errs, errors.New("PARLEY_GATEWAY_PUBLISH_MAX_PENDING must be at least 1"))
	}
	if c.GroupsInFlight < 1 {
		errs = append(errs, errors.New("PARLEY_GATEWAY_GROUPS_IN_FLIGHT must be at least 1"))
	}
	if c.GroupMaxBatches < 1 || c.GroupMaxBatches > bus.MaxGroup {
		errs = append(errs, fmt.Errorf("PARLEY_GATEWAY_GROUP_MAX_BATCHES must be 1 to %d", bus.MaxGroup))
	}
	if c.StatusGroupMax < 1 || c.StatusGroupMax > 10000 {
		errs = append(errs, errors.New("PARLEY_GATEWAY_STATUS_GROUP_MAX must be 1 to 10000"))
	}
	if c.StatusGroupWait < 0 || c.StatusGroupWait > time.Second {
		errs = append(errs, errors.New("PARLEY_GATEWAY_STATUS_GROUP_WAIT must be 0 to 1s"))
	}
	if c.StatusAppliers < 1 {
		errs = append(errs, errors.New("PARLEY_GATEWAY_STATUS_APPLIERS must be at least 1"))
	}
	if c.GCPercent < -1 || c.GCPercent == 0 {
		errs = append(errs, errors.New("PARLEY_GATEWAY_GC_PERCENT must be positive (or -1)"))
	}
	if c.WebhookAppSecret == "" {
		errs = append(errs, errors.New("PARLEY_WEBHOOK_APP_SECRET is empty: status callbacks could not be verified"))
	}
	if c.WebhookVerifyToken == "" {
		errs = append(errs, errors.New("PARLEY_WEBHOOK_VERIFY_TOKEN is empty"))
	}
	if c.IdempotencyRetention < time.Minute {
		errs = append(errs, errors.New("PARLEY_GATEWAY_IDEMPOTENCY_RETENTION must be at least 1m"))
	}
	return errors.Join(append(errs, c.Log.Validate(), c.Postgres.Validate(), c.Redis.Validate(), c.NATS.Validate())...)
}

// EffectiveStatusAppliers is StatusAppliers, less when the pool would
// have no connection left for the requests: at most
// PARLEY_POSTGRES_MAX_CONNS - 1, at least 1.
func (c Config) EffectiveStatusAppliers() int {
	return max(1, min(c.StatusAppliers, int(c.Postgres.MaxConns)-1))
}
