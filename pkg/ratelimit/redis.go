package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/pkg/ops"
)

// RedisConfig is the Redis part of a service's configuration. KeyPrefix keeps
// environments (and tests) sharing one server apart.
type RedisConfig struct {
	Addr      string        `env:"PARLEY_REDIS_ADDR" envDefault:"127.0.0.1:6379"`
	Password  string        `env:"PARLEY_REDIS_PASSWORD"`
	DB        int           `env:"PARLEY_REDIS_DB" envDefault:"0"`
	KeyPrefix string        `env:"PARLEY_REDIS_KEY_PREFIX" envDefault:"parley:"`
	Timeout   time.Duration `env:"PARLEY_REDIS_TIMEOUT" envDefault:"50ms"`
}

// Validate reports every problem with the configuration.
func (c RedisConfig) Validate() error {
	var errs []error
	if c.Addr == "" {
		errs = append(errs, errors.New("PARLEY_REDIS_ADDR is empty"))
	}
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("PARLEY_REDIS_TIMEOUT must be positive"))
	}
	return errors.Join(errs...)
}

// NewRedisClient returns a client whose every call is bounded by the
// configured timeout, so that a slow Redis cannot stall a request.
func NewRedisClient(c RedisConfig) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:         c.Addr,
		Password:     c.Password,
		DB:           c.DB,
		DialTimeout:  250 * time.Millisecond,
		ReadTimeout:  c.Timeout,
		WriteTimeout: c.Timeout,
		PoolTimeout:  c.Timeout,
		MaxRetries:   -1, // a failed call falls back at once instead of retrying
		// One dial attempt: the default retries a refused dial five times,
		// 100ms apart, which outlasts every rate-limit deadline.
		DialerRetries: 1,
	})
}

// Check is the readiness check of a Redis client: it answers PING.
func Check(rdb *redis.Client) ops.Check {
	return ops.Check{Name: "redis", Ping: func(ctx context.Context) error {
		if err := rdb.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("redis: %w", err)
		}
		return nil
	}}
}
