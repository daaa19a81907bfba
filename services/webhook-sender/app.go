package main

import (
	"context"
	"fmt"
	"net/http"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/ops"
	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/pkg/store"
	"github.com/parleyhq/parley/pkg/webhooks"
	"github.com/parleyhq/parley/services/webhook-sender/internal/config"
	"github.com/parleyhq/parley/services/webhook-sender/internal/sender"
)

// app is the webhook sender's composition root.
type app struct {
	log    *zap.Logger
	probe  *ops.Probe
	server *ops.Server
	sender *sender.Sender
}

// newApp connects PostgreSQL and NATS and builds the sender and the probe's
// server. cleanup drains NATS and closes the pool, after Run has returned;
// it is safe to call after an error too.
func newApp(ctx context.Context, cfg config.Config, log *zap.Logger) (a *app, cleanup func(), err error) {
	var closers ops.Closers
	cleanup = closers.Close
	fail := func(err error) (*app, func(), error) {
		cleanup()
		return nil, func() {}, err
	}
	if cfg.Token.IsDevKey() {
		log.Warn("PARLEY_TOKEN_KEY is the development key: never use it in production")
	}
	if cfg.Webhooks.AllowPrivate {
		log.Warn("PARLEY_WEBHOOKS_ALLOW_PRIVATE is on: endpoints may use http and private addresses; never in production")
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
	nc, err := bus.Connect(cfg.NATS, "parley-webhook-sender")
	if err != nil {
		return fail(err)
	}
	closers.Add(func() { _ = nc.Drain() })
	js, err := bus.JetStream(nc)
	if err != nil {
		return fail(err)
	}
	probe := ops.NewProbe(store.Check(pool), bus.Check(nc))
	client := sender.NewClient(cfg.Sender.Timeout, cfg.Sender.Concurrency, cfg.Webhooks.AllowPrivate, nil)
	closers.Add(client.CloseIdleConnections)
	s, err := sender.New(cfg.Sender, sender.Deps{
		Pool: pool, JS: js, Store: webhooks.NewStore(pool, box, cfg.Webhooks), Client: client,
		Prefix: cfg.NATS.Prefix, Replicas: cfg.NATS.StreamReplicas, AllowPrivate: cfg.Webhooks.AllowPrivate,
		Log: log, Registry: probe.Registry(),
	})
	if err != nil {
		return fail(err)
	}
	mux := http.NewServeMux()
	probe.Register(mux)
	srv := ops.NewServer(cfg.Addr, mux)
	srv.DrainDelay = cfg.DrainDelay
	return &app{log: log, probe: probe, server: srv, sender: s}, cleanup, nil
}

// Run serves the probe and sends until ctx ends. On shutdown readiness turns
// 503 first, then the sender stops taking events and deliveries, lets the
// requests in flight finish and their outcomes be recorded.
func (a *app) Run(ctx context.Context) error {
	return a.server.RunWorker(ctx, a.probe, a.log, a.sender.Run)
}
