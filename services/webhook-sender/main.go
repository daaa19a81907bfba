// The webhook sender relays committed events from the outbox to the EVENTS
// stream and delivers them, signed as Standard Webhooks, to every company
// endpoint subscribed to them.
package main

import (
	"github.com/parleyhq/parley/pkg/ops"
	"github.com/parleyhq/parley/services/webhook-sender/internal/config"
)

func main() {
	ops.Main("webhook-sender", config.Load, func(c config.Config) ops.LogConfig { return c.Log },
		newApp, (*app).Run)
}
