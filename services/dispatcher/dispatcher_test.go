package dispatcher_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/caarlos0/env/v11"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/services/dispatcher"
	"github.com/parleyhq/parley/testkit/bustest"
	"github.com/parleyhq/parley/testkit/ratelimittest"
	"github.com/parleyhq/parley/testkit/storetest"
)

func defaults(t *testing.T) dispatcher.Config {
	t.Helper()
	cfg, err := env.ParseAs[dispatcher.Config]()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	cfg := defaults(t)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	cfg.DrainDelay = -time.Second
	cfg.Log.Level = "loud"
	cfg.Provider.BaseURL = ""
	cfg.Dispatch.Workers = 0
	err := cfg.Validate()
	for _, want := range []string{"PARLEY_DRAIN_DELAY", "PARLEY_LOG_LEVEL", "PARLEY_WHATSAPP_BASE_URL", "PARLEY_DISPATCH_WORKERS"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want it to name %s", err, want)
		}
	}
}

// A probe that cannot listen stops the dispatcher and Run says why, rather
// than a process dispatching without health checks.
func TestRunStopsWhenTheProbeCannotListen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dbURL, _ := storetest.NewDatabase(t)
	cfg := defaults(t)
	cfg.Postgres.URL = dbURL
	cfg.NATS = bustest.Config(bustest.NewServer(t).URL())
	cfg.Redis = ratelimittest.Config(t)

	s, cleanup, err := dispatcher.New(context.Background(), record.LaneAutomation, ln.Addr().String(), cfg,
		zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)))
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "listen "+ln.Addr().String()) {
			t.Fatalf("Run = %v, want the listen error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run kept going without its probe")
	}
}

// A token key that cannot open the accounts' tokens stops New before it
// connects anything; the cleanup it returns is still safe to call.
func TestNewFailsOnABadTokenKey(t *testing.T) {
	cfg := defaults(t)
	cfg.Token.Key = "short"
	_, cleanup, err := dispatcher.New(context.Background(), record.LaneCampaign, "127.0.0.1:0", cfg, zap.NewNop())
	if err == nil || !strings.Contains(err.Error(), "token key") {
		t.Fatalf("New = %v, want the token key's error", err)
	}
	cleanup()
}
