package main

import (
	"context"
	"fmt"
	"net/http"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
	"github.com/parleyhq/parley/pkg/ops"
	"github.com/parleyhq/parley/pkg/webhooks/webhooksim"
	"github.com/parleyhq/parley/services/provider-sim/internal/config"
)

// app is provider-sim's composition root.
type app struct {
	log    *zap.Logger
	probe  *ops.Probe
	sim    *whatsappsim.Sim
	server *ops.Server
}

func newApp(_ context.Context, cfg config.Config, log *zap.Logger) (*app, func(), error) {
	simCfg, err := cfg.SimConfig()
	if err != nil {
		return nil, nil, err
	}
	probe := ops.NewProbe()
	simCfg.Log = log
	simCfg.Registerer = probe.Registry()
	sim, err := whatsappsim.New(simCfg)
	if err != nil {
		return nil, nil, fmt.Errorf("start simulator: %w", err)
	}
	// The webhook test receiver (pkg/webhooks/webhooksim) beside the
	// simulator: deliveries to /_webhooks/hooks/{name}, its control and
	// figures at /_webhooks/_control/{name}.
	recv := webhooksim.New()
	mux := http.NewServeMux()
	probe.Register(mux)
	mux.Handle("/_webhooks/", http.StripPrefix("/_webhooks", recv))
	mux.Handle("/", sim)
	server := ops.NewServer(cfg.Addr, mux)
	// Simulated timeouts hold requests until the client gives up; closing
	// the simulator when shutdown begins answers them, so that draining
	// does not wait for them.
	server.HTTP.RegisterOnShutdown(func() {
		_ = sim.Close()
		recv.Close()
	})

	log.Info("simulator configured",
		zap.Int("accounts", len(simCfg.Accounts)),
		zap.Int("throughput_per_second", simCfg.Throughput),
		zap.Bool("callbacks", simCfg.Callbacks.URL != ""),
		zap.Float64("error_rate", simCfg.Faults.ErrorRate),
		zap.Float64("timeout_rate", simCfg.Faults.TimeoutRate),
		zap.Duration("latency", simCfg.Faults.Latency),
		zap.Int("message_buffer", simCfg.MessageBuffer),
		zap.Int("max_recipients", simCfg.MaxRecipients),
	)
	return &app{log: log, probe: probe, sim: sim, server: server}, func() { _ = sim.Close() }, nil
}

func (a *app) run(ctx context.Context) error {
	return a.server.Run(ctx, a.probe, a.log)
}
