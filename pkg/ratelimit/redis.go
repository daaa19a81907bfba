package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/pkg/ops"
)

// Redis deployment modes, the values of PARLEY_REDIS_MODE.
const (
	ModeSingle   = "single"   // one server (or a proxy in front of several)
	ModeSentinel = "sentinel" // Addr lists the sentinels, MasterName names the master they watch
	ModeCluster  = "cluster"  // Addr lists some of the cluster's nodes; the rest are discovered
)

// RedisConfig is the Redis part of a service's configuration. KeyPrefix keeps
// environments (and tests) sharing one server apart.
//
// Addr is a comma-separated list: one host:port in single mode, the
// sentinels in sentinel mode, seed nodes in cluster mode.
type RedisConfig struct {
	Mode             string        `env:"PARLEY_REDIS_MODE" envDefault:"single"`
	Addr             string        `env:"PARLEY_REDIS_ADDR" envDefault:"127.0.0.1:6379"`
	MasterName       string        `env:"PARLEY_REDIS_MASTER_NAME"`
	Password         string        `env:"PARLEY_REDIS_PASSWORD"`
	SentinelPassword string        `env:"PARLEY_REDIS_SENTINEL_PASSWORD"`
	DB               int           `env:"PARLEY_REDIS_DB" envDefault:"0"`
	KeyPrefix        string        `env:"PARLEY_REDIS_KEY_PREFIX" envDefault:"parley:"`
	Timeout          time.Duration `env:"PARLEY_REDIS_TIMEOUT" envDefault:"50ms"`
}

// Addrs is Addr split at its commas, blanks trimmed and empty entries
// dropped.
func (c RedisConfig) Addrs() []string {
	var out []string
	for a := range strings.SplitSeq(c.Addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// mode is Mode with the empty string read as single (a RedisConfig built in
// code rather than from the environment).
func (c RedisConfig) mode() string {
	if c.Mode == "" {
		return ModeSingle
	}
	return c.Mode
}

// Validate reports every problem with the configuration.
func (c RedisConfig) Validate() error {
	var errs []error
	addrs := c.Addrs()
	if len(addrs) == 0 {
		errs = append(errs, errors.New("PARLEY_REDIS_ADDR is empty"))
	}
	switch c.mode() {
	case ModeSingle:
		if len(addrs) > 1 {
			errs = append(errs, errors.New("PARLEY_REDIS_ADDR lists several servers: set PARLEY_REDIS_MODE to sentinel or cluster"))
		}
		if c.MasterName != "" {
			errs = append(errs, errors.New("PARLEY_REDIS_MASTER_NAME is set: it needs PARLEY_REDIS_MODE=sentinel"))
		}
	case ModeSentinel:
		if c.MasterName == "" {
			errs = append(errs, errors.New("PARLEY_REDIS_MASTER_NAME is empty: sentinel mode needs the name of the master the sentinels watch"))
		}
	case ModeCluster:
		if c.DB != 0 {
			errs = append(errs, errors.New("PARLEY_REDIS_DB must be 0 in cluster mode: a Redis Cluster has only database 0"))
		}
		if c.MasterName != "" {
			errs = append(errs, errors.New("PARLEY_REDIS_MASTER_NAME is set: it needs PARLEY_REDIS_MODE=sentinel"))
		}
	default:
		errs = append(errs, fmt.Errorf("PARLEY_REDIS_MODE %q: want single, sentinel or cluster", c.Mode))
	}
	for _, a := range addrs {
		_, port, err := net.SplitHostPort(a)
		if p, perr := strconv.Atoi(port); err != nil || perr != nil || p < 1 || p > 65535 {
			errs = append(errs, fmt.Errorf("PARLEY_REDIS_ADDR entry %q is not host:port", a))
		}
	}
	if strings.ContainsAny(c.KeyPrefix, "{}") {
		errs = append(errs, errors.New("PARLEY_REDIS_KEY_PREFIX must not contain { or }: a company's keys are kept in one cluster slot by a {c:<id>} tag after the prefix"))
	}
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("PARLEY_REDIS_TIMEOUT must be positive"))
	}
	return errors.Join(errs...)
}

// NewRedisClient returns a client for the configured mode (one server, a
// sentinel-watched master, or a cluster) whose every call is bounded by the
// configured timeout, so that a slow Redis cannot stall a request.
func NewRedisClient(c RedisConfig) redis.UniversalClient {
	o := &redis.UniversalOptions{
		Addrs:            c.Addrs(),
		Password:         c.Password,
		DB:               c.DB,
		MasterName:       c.MasterName,
		SentinelPassword: c.SentinelPassword,
		DialTimeout:      250 * time.Millisecond,
		ReadTimeout:      c.Timeout,
		WriteTimeout:     c.Timeout,
		PoolTimeout:      c.Timeout,
		MaxRetries:       -1, // a failed call falls back at once instead of retrying
		// One dial attempt: the default retries a refused dial five times,
		// 100ms apart, which outlasts every rate-limit deadline.
		DialerRetries: 1,
		// In a cluster, follow one MOVED or ASK (a slot that changed hands
		// in a failover or a resharding) within the call; a dead node is
		// not retried: the call falls back.
		MaxRedirects: 1,
	}
	switch c.mode() {
	case ModeSentinel:
		return redis.NewFailoverClient(o.Failover())
	case ModeCluster:
		return redis.NewClusterClient(o.Cluster())
	default:
		return redis.NewClient(o.Simple())
	}
}

// CompanyKey is the limiter key of name (a route, an account) for a
// company. Its {c:<id>} hash tag puts every key of the company in one
// Redis Cluster slot, so that they live and fail together on one node and a
// script or pipeline may use several of them at once.
func CompanyKey(companyID int64, name string) string {
	return "{c:" + strconv.FormatInt(companyID, 10) + "}:" + name
}

// RequestKey is the Redis key Allow keeps key's state under.
func (c RedisConfig) RequestKey(key string) string { return c.KeyPrefix + "rate:" + requestNS + key }

// ThroughputKey is the Redis key Take keeps key's state under.
func (c RedisConfig) ThroughputKey(key string) string {
	return c.KeyPrefix + "rate:" + throughputNS + key
}

// Check is the readiness check of a Redis client: it answers PING (in a
// cluster, every master does). It is optional: a process whose Redis is
// away keeps serving with per-process limits (see Limiter), so /readyz
// names Redis under "degraded" and stays 200 rather than taking every
// replica out of its load balancer at once.
func Check(rdb redis.UniversalClient) ops.Check {
	return ops.Check{Name: "redis", Optional: true, Ping: func(ctx context.Context) error {
		var err error
		if cc, ok := rdb.(*redis.ClusterClient); ok {
			err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
				return m.Ping(ctx).Err()
			})
		} else {
			err = rdb.Ping(ctx).Err()
		}
		if err != nil {
			return fmt.Errorf("redis: %w", err)
		}
		return nil
	}}
}
