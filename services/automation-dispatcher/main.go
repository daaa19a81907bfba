// The automation dispatcher delivers automation triggers from the SENDS stream to the channel provider.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/parleyhq/parley/pkg/ops"
	"github.com/parleyhq/parley/services/automation-dispatcher/internal/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "automation-dispatcher: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	log, err := ops.NewLogger("automation-dispatcher", cfg.Log.Level, cfg.Log.Format)
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
