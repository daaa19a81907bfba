// provider-sim stands in for the WhatsApp Cloud API, which this machine cannot reach: it speaks the same wire format on loopback.
package main

import (
	"github.com/parleyhq/parley/pkg/ops"
	"github.com/parleyhq/parley/services/provider-sim/internal/config"
)

func main() {
	ops.Main("provider-sim", config.Load, func(c config.Config) ops.LogConfig { return c.Log },
		newApp, (*app).run)
}
