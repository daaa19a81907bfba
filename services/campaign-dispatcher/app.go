package main

import (
	"context"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/delivery/dispatchsvc"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/services/campaign-dispatcher/internal/config"
)

// lane is what this dispatcher sends.
const lane = record.LaneCampaign

// newApp builds the campaign dispatcher: the composition both dispatchers
// share (pkg/delivery/dispatchsvc) on its lane and listen address. cleanup
// drains NATS and closes the pools, after Run has returned.
func newApp(ctx context.Context, cfg config.Config, log *zap.Logger) (*dispatchsvc.Service, func(), error) {
	return dispatchsvc.New(ctx, lane, cfg.Addr, cfg.Config, log)
}
