package main

import (
	"context"
	"net/http"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/ops"
	"github.com/parleyhq/parley/services/provider-sim/internal/config"
)

// app is provider-sim's composition root.
type app struct {
	log    *zap.Logger
	probe  *ops.Probe
	server *ops.Server
}

func newApp(_ context.Context, cfg config.Config, log *zap.Logger) (*app, func(), error) {
	probe := ops.NewProbe()
	mux := http.NewServeMux()
	probe.Register(mux)
	return &app{log: log, probe: probe, server: ops.NewServer(cfg.Addr, mux)}, func() {}, nil
}

func (a *app) run(ctx context.Context) error {
	return a.server.Run(ctx, a.probe, a.log)
}
