package main

import (
	"context"
	"testing"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/delivery/dispatchsvc"
	"github.com/parleyhq/parley/services/automation-dispatcher/internal/config"
	"github.com/parleyhq/parley/testkit/dispatchsvctest"
)

// TestAppDeliversAndShutsDownInOrder boots this binary's newApp, with its
// own configuration, against a fresh database, an embedded NATS, Redis
// under a key prefix of its own and the WhatsApp simulator: it must make
// the stream, deliver a batch of its lane, serve its probes and metrics,
// and stop cleanly (dispatchsvctest says what is checked).
func TestAppDeliversAndShutsDownInOrder(t *testing.T) {
	dispatchsvctest.DeliversAndShutsDown(t, lane, func(ctx context.Context, addr string, shared dispatchsvc.Config, log *zap.Logger) (*dispatchsvc.Service, func(), error) {
		cfg := config.Config{Addr: addr, Config: shared}
		if err := cfg.Validate(); err != nil {
			return nil, nil, err
		}
		return newApp(ctx, cfg, log)
	})
}
