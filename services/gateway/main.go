// The gateway is Parley's public API: it authenticates the company key,
// applies the rate limits, validates sends and hands them to JetStream.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/parleyhq/parley/pkg/ops"
	"github.com/parleyhq/parley/services/gateway/internal/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "gateway: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	log, err := ops.NewLogger("gateway", cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck
	a, cleanup, err := newApp(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer cleanup()
	return a.run(ctx)
}
