package main

import (
	"context"
	"net/http"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/ops"
	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/store"
	"github.com/parleyhq/parley/services/campaign-dispatcher/internal/config"
)

// app is the campaign dispatcher's composition root.
type app struct {
	log    *zap.Logger
	probe  *ops.Probe
	server *ops.Server
}

// newApp connects the dependencies and builds the HTTP handler. cleanup
// releases what was opened, in reverse order.
func newApp(ctx context.Context, cfg config.Config, log *zap.Logger) (*app, func(), error) {
	var closers []func()
	cleanup := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	pool, err := store.Open(ctx, cfg.Postgres)
	if err != nil {
		return nil, cleanup, err
	}
	closers = append(closers, pool.Close)

	rdb := ratelimit.NewRedisClient(cfg.Redis)
	closers = append(closers, func() { _ = rdb.Close() })

	nc, err := bus.Connect(cfg.NATS, "parley-campaign-dispatcher")
	if err != nil {
		cleanup()
		return nil, func() {}, err
	}
	closers = append(closers, func() { _ = nc.Drain() })

	probe := ops.NewProbe(
		ops.Check{Name: "postgres", Ping: pool.Ping},
		ops.Check{Name: "redis", Ping: func(ctx context.Context) error { return ratelimit.Ping(ctx, rdb) }},
		ops.Check{Name: "nats", Ping: func(context.Context) error { return bus.Ping(nc) }},
	)
	mux := http.NewServeMux()
	probe.Register(mux)
	srv := ops.NewServer(cfg.Addr, mux)
	srv.DrainDelay = cfg.DrainDelay
	return &app{log: log, probe: probe, server: srv}, cleanup, nil
}

func (a *app) run(ctx context.Context) error {
	return a.server.Run(ctx, a.probe, a.log)
}
