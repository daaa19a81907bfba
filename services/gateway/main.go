// The gateway is Parley's public API: it authenticates the company key,
// applies the rate limits, validates sends and hands them to JetStream.
package main

import (
	"github.com/parleyhq/parley/pkg/ops"
	"github.com/parleyhq/parley/services/gateway/internal/config"
)

func main() {
	ops.Main("gateway", config.Load, func(c config.Config) ops.LogConfig { return c.Log },
		newApp, (*app).run)
}
