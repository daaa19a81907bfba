package cli

import (
	"context"

	"github.com/parleyhq/parley/pkg/bus"
)

// invalidate tells every gateway, over NATS, to drop what it cached about the
// records a command just changed. It runs after the change is committed and
// never undoes it: if NATS cannot be reached the change stands, a warning
// goes to stderr, and the gateways' cache TTL bounds how long they serve the
// old record.
func (e *env) invalidate(ctx context.Context, invs ...bus.Invalidation) {
	if len(invs) == 0 {
		return
	}
	cfg, err := e.config()
	if err != nil {
		e.warnf("the change is saved, but no invalidation was published: %v", err)
		return
	}
	warn := func(err error) {
		e.warnf("the change is saved, but NATS at %s did not take the cache invalidation (%v); gateways will pick the change up within their cache TTL", cfg.NATS.URL, err)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.PublishTimeout)
	defer cancel()
	nc, err := bus.Connect(cfg.NATS, "parleyctl")
	if err != nil {
		warn(err)
		return
	}
	defer nc.Close()
	for _, inv := range invs {
		if err := bus.PublishInvalidation(ctx, nc, cfg.NATS, inv); err != nil {
			warn(err)
			return
		}
	}
}
