// The admin service is the operator's and company admin's surface (the Credentials page and the admin API); it is never exposed with the public API.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/parleyhq/parley/pkg/ops"
	"github.com/parleyhq/parley/services/admin/internal/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "admin: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	log, err := ops.NewLogger("admin", cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck
	a, cleanup, err := newApp(ctx, cfg, log, time.Now)
	if err != nil {
		return err
	}
	defer cleanup()
	return a.run(ctx)
}
