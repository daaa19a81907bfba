// The webhook sender relays committed events from the outbox to the EVENTS
// stream and delivers them, signed as Standard Webhooks, to every company
// endpoint subscribed to them.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/parleyhq/parley/pkg/ops"
	"github.com/parleyhq/parley/services/webhook-sender/internal/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "webhook-sender: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	log, err := ops.NewLogger("webhook-sender", cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck
	a, cleanup, err := newApp(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer cleanup()
	return a.Run(ctx)
}
