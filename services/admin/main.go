// The admin service is the operator's and company admin's surface (the Credentials page and the admin API); it is never exposed with the public API.
package main

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/ops"
	"github.com/parleyhq/parley/services/admin/internal/config"
)

func main() {
	ops.Main("admin", config.Load, func(c config.Config) ops.LogConfig { return c.Log },
		func(ctx context.Context, cfg config.Config, log *zap.Logger) (*app, func(), error) {
			return newApp(ctx, cfg, log, time.Now)
		}, (*app).run)
}
