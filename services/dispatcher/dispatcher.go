// Package dispatcher is the dispatcher service's composition root: the
// process that cmd/campaign-dispatcher and cmd/automation-dispatcher both
// run, each on its lane. It opens PostgreSQL, Redis and NATS, makes sure the
// SENDS stream exists, builds the shared throughput limiter, the WhatsApp
// client and the lane's delivery.Dispatcher, serves the probe (/healthz,
// /readyz with every dependency, /metrics) and shuts down in order.
//
// What differs between the two commands is their name, their lane and their
// listen variable (internal/config); README.md says why they are one module.
package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/delivery"
	"github.com/parleyhq/parley/pkg/envconfig"
	"github.com/parleyhq/parley/pkg/ops"
	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/pkg/store"
	"github.com/parleyhq/parley/pkg/waba"
)

// Config is what both dispatchers read from the environment besides their
// listen address, which each command names for its lane
// (PARLEY_CAMPAIGN_DISPATCHER_ADDR, PARLEY_AUTOMATION_DISPATCHER_ADDR) in
// internal/config, embedding this struct.
type Config struct {
	// DrainDelay is how long /readyz reports 503 before the listener closes.
	DrainDelay time.Duration `env:"PARLEY_DRAIN_DELAY" envDefault:"0s"`

	Log      ops.LogConfig
	Postgres store.Config
	Redis    ratelimit.RedisConfig
	NATS     bus.Config
	// Token opens the messaging accounts' access tokens.
	Token    secretbox.Config
	Provider delivery.ProviderConfig
	Dispatch delivery.Config
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.DrainDelay < 0 {
		errs = append(errs, errors.New("PARLEY_DRAIN_DELAY must not be negative"))
	}
	return errors.Join(append(errs, c.Log.Validate(), c.Postgres.Validate(), c.Redis.Validate(), c.NATS.Validate(),
		c.Token.Validate(), c.Provider.Validate(), c.Dispatch.Validate(c.Provider.Timeout))...)
}

// Service is one dispatcher process of a lane.
type Service struct {
	log        *zap.Logger
	probe      *ops.Probe
	server     *ops.Server
	dispatcher *delivery.Dispatcher
}

// New connects the dependencies, makes sure the SENDS stream exists, and
// builds the lane's dispatcher and the probe's HTTP server on addr. cleanup
// releases what was opened, in reverse order: the NATS connection drains
// before the pools close. It is safe to call after an error too.
func New(ctx context.Context, lane record.Lane, addr string, cfg Config, log *zap.Logger) (s *Service, cleanup func(), err error) {
	var closers ops.Closers
	cleanup = closers.Close
	fail := func(err error) (*Service, func(), error) {
		cleanup()
		return nil, func() {}, err
	}
	if cfg.Token.IsDevKey() {
		log.Warn("PARLEY_TOKEN_KEY is the development key: never use it in production")
	}
	box, err := secretbox.New(cfg.Token.Key)
	if err != nil {
		return fail(fmt.Errorf("token key: %w", err))
	}
	pool, err := store.Open(ctx, cfg.Postgres)
	if err != nil {
		return fail(err)
	}
	closers.Add(pool.Close)

	rdb := ratelimit.NewRedisClient(cfg.Redis)
	closers.Add(func() { _ = rdb.Close() })

	// The client name is the process's: parley-campaign-dispatcher, ...
	nc, err := bus.Connect(cfg.NATS, "parley-"+delivery.ConsumerName(lane))
	if err != nil {
		return fail(err)
	}
	closers.Add(func() { _ = nc.Drain() })
	js, err := bus.JetStream(nc)
	if err != nil {
		return fail(err)
	}
	if _, err := bus.EnsureStream(ctx, js, cfg.NATS); err != nil {
		return fail(err)
	}

	probe := ops.NewProbe(store.Check(pool), ratelimit.Check(rdb), bus.Check(nc))
	limiter, err := ratelimit.New(rdb, cfg.Redis, log, probe.Registry())
	if err != nil {
		return fail(fmt.Errorf("throughput limiter: %w", err))
	}
	closers.Add(limiter.Close)
	client, err := whatsapp.NewClient(whatsapp.Config{
		BaseURL: cfg.Provider.BaseURL, APIVersion: cfg.Provider.APIVersion,
		Timeout: cfg.Provider.Timeout, MaxConnsPerHost: cfg.Provider.MaxConns,
	})
	if err != nil {
		return fail(fmt.Errorf("provider client: %w", err))
	}
	closers.Add(client.Close)
	cat := catalog.NewStore(pool, box)
	sync := waba.Deps{Pool: pool, Catalog: cat, Provider: client, Log: log}
	d, err := delivery.New(lane, cfg.Dispatch, delivery.Deps{
		Pool: pool, JS: js, Bus: cfg.NATS, Catalog: cat,
		Sender: client, Throttle: limiter, Log: log, Registry: probe.Registry(), ProviderTimeout: cfg.Provider.Timeout,
		Pacer:         ratelimit.NewPacer(rdb, cfg.Redis),
		SyncTemplates: func(ctx context.Context) (int, error) { return waba.SyncTemplates(ctx, sync) },
	})
	if err != nil {
		return fail(err)
	}

	mux := http.NewServeMux()
	probe.Register(mux)
	srv := ops.NewServer(addr, mux)
	srv.DrainDelay = cfg.DrainDelay
	return &Service{log: log, probe: probe, server: srv, dispatcher: d}, cleanup, nil
}

// Run serves the probe and dispatches until ctx ends. On shutdown readiness
// turns 503 first, then the dispatcher stops taking batches, lets the sends
// in flight finish and its recorder flush; cleanup then drains NATS and
// closes the pools. If the server or the dispatcher fails first, Run stops
// the other and returns the error.
func (s *Service) Run(ctx context.Context) error {
	return s.server.RunWorker(ctx, s.probe, s.log, s.dispatcher.Run)
}

// Command is a dispatcher command's environment (internal/config's Campaign
// or Automation): the listen address it names for its lane, and Config.
type Command interface {
	envconfig.Validator
	// Listen is the address of the probe and the metrics.
	Listen() string
	// Shared is the rest of the configuration, the same for both lanes.
	Shared() Config
}

// Main runs the dispatcher command name on lane, with the environment C,
// until SIGINT or SIGTERM; it exits non-zero when the dispatcher cannot start
// or fails.
func Main[C Command](name string, lane record.Lane) {
	ops.Main(name, envconfig.Load[C], func(c C) ops.LogConfig { return c.Shared().Log },
		func(ctx context.Context, c C, log *zap.Logger) (*Service, func(), error) {
			return New(ctx, lane, c.Listen(), c.Shared(), log)
		}, (*Service).Run)
}
