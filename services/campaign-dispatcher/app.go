package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/delivery"
	"github.com/parleyhq/parley/pkg/ops"
	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/pkg/store"
	"github.com/parleyhq/parley/services/campaign-dispatcher/internal/config"
)

// lane is what this dispatcher sends.
const lane = delivery.LaneCampaign

// app is the campaign dispatcher's composition root.
type app struct {
	log        *zap.Logger
	probe      *ops.Probe
	server     *ops.Server
	dispatcher *delivery.Dispatcher
}

// newApp connects the dependencies, makes sure the SENDS stream exists, and
// builds the dispatcher and the probe's HTTP handler. cleanup releases what
// was opened, in reverse order: the NATS connection drains before the pools
// close.
func newApp(ctx context.Context, cfg config.Config, log *zap.Logger) (*app, func(), error) {
	var closers []func()
	cleanup := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	fail := func(err error) (*app, func(), error) {
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
	closers = append(closers, pool.Close)

	rdb := ratelimit.NewRedisClient(cfg.Redis)
	closers = append(closers, func() { _ = rdb.Close() })

	nc, err := bus.Connect(cfg.NATS, "parley-campaign-dispatcher")
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { _ = nc.Drain() })
	js, err := bus.JetStream(nc)
	if err != nil {
		return fail(err)
	}
	if _, err := bus.EnsureStream(ctx, js, cfg.NATS); err != nil {
		return fail(err)
	}

	probe := ops.NewProbe(
		ops.Check{Name: "postgres", Ping: pool.Ping},
		ops.Check{Name: "redis", Ping: func(ctx context.Context) error { return ratelimit.Ping(ctx, rdb) }},
		ops.Check{Name: "nats", Ping: func(context.Context) error { return bus.Ping(nc) }},
	)
	limiter, err := ratelimit.New(rdb, cfg.Redis, log, probe.Registry())
	if err != nil {
		return fail(fmt.Errorf("throughput limiter: %w", err))
	}
	closers = append(closers, limiter.Close)
	client, err := whatsapp.NewClient(whatsapp.Config{
		BaseURL: cfg.Provider.BaseURL, APIVersion: cfg.Provider.APIVersion,
		Timeout: cfg.Provider.Timeout, MaxConnsPerHost: cfg.Provider.MaxConns,
	})
	if err != nil {
		return fail(fmt.Errorf("provider client: %w", err))
	}
	closers = append(closers, client.Close)
	d, err := delivery.New(lane, cfg.Dispatch, delivery.Deps{
		Pool: pool, JS: js, Bus: cfg.NATS, Catalog: catalog.NewStore(pool, box),
		Sender: client, Throttle: limiter, Log: log, Registry: probe.Registry(),
	})
	if err != nil {
		return fail(err)
	}

	mux := http.NewServeMux()
	probe.Register(mux)
	srv := ops.NewServer(cfg.Addr, mux)
	srv.DrainDelay = cfg.DrainDelay
	return &app{log: log, probe: probe, server: srv, dispatcher: d}, cleanup, nil
}

// run serves the probe and dispatches until ctx ends. On shutdown readiness
// turns 503 first, then the dispatcher stops taking batches, lets the sends
// in flight finish and its recorder flush; cleanup then drains NATS and
// closes the pools.
func (a *app) run(ctx context.Context) error {
	sctx, stopServer := context.WithCancel(ctx)
	defer stopServer()
	dctx, stopDispatch := context.WithCancel(context.Background())
	defer stopDispatch()
	srvErr := make(chan error, 1)
	go func() { srvErr <- a.server.Run(sctx, a.probe, a.log) }()
	dispErr := make(chan error, 1)
	go func() { dispErr <- a.dispatcher.Run(dctx) }()
	select {
	case <-ctx.Done():
		a.probe.ShuttingDown()
		stopDispatch()
		derr := <-dispErr
		return errors.Join(derr, <-srvErr)
	case err := <-dispErr:
		// The dispatcher could not start (its consumer, say).
		stopServer()
		return errors.Join(err, <-srvErr)
	case err := <-srvErr:
		stopDispatch()
		return errors.Join(err, <-dispErr)
	}
}
