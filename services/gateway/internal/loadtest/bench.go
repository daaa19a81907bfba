package loadtest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/serviceproc"
)

// BenchOptions are the knobs of make bench-gateway.
type BenchOptions struct {
	Companies     int
	Conns         int
	Warmup        time.Duration
	Measure       time.Duration
	GatewayBinary string
}

// Where the local servers are; PARLEY_* variables override them as they do
// for the services.
func serverURLs() (pgAdmin, redisAddr, natsURL string) {
	pgAdmin = envOr("PARLEY_BENCH_POSTGRES_ADMIN_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
	return pgAdmin, envOr("PARLEY_REDIS_ADDR", "127.0.0.1:6379"), envOr("PARLEY_NATS_URL", "nats://127.0.0.1:4222")
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Bench runs the floor and the gateway scenarios and writes a report to w.
// Everything it creates (database, streams, Redis keys) is removed after.
func Bench(ctx context.Context, o BenchOptions, w io.Writer) error {
	sc, err := newScratch(ctx, "bench", o.Companies, w)
	if err != nil {
		return err
	}
	defer sc.close()
	small, large := CampaignRequests(sc.tenants, 10), CampaignRequests(sc.tenants, 1000)
	busCfg := sc.bus("bench")
	if _, err := bus.EnsureStream(ctx, sc.js, busCfg); err != nil {
		return err
	}
	purge := func() error {
		s, err := sc.js.Stream(ctx, busCfg.Stream)
		if err != nil {
			return err
		}
		return s.Purge(ctx)
	}
	env := append(sc.env(busCfg), "PARLEY_GATEWAY_ACCESS_LOG=false")

	fmt.Fprintf(w, "load: %d connections, %s warm-up, %s measured per scenario, %d companies\n", o.Conns, o.Warmup, o.Measure, o.Companies)
	// The floor, as a separate process like the gateway.
	floorAddr, err := serviceproc.FreeAddr()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	floor, err := serviceproc.Start(ctx, serviceproc.Options{Name: "floor", Bin: self, Args: []string{"floor"},
		Env:   append(env, "PARLEY_BENCH_FLOOR_ADDR="+floorAddr, "PARLEY_BENCH_FLOOR_SUBJECT="+busCfg.CampaignSubject(0)),
		Probe: "http://" + floorAddr + "/healthz", WantStatus: http.StatusNotFound, Output: os.Stderr})
	if err != nil {
		return err
	}
	floorRes, err := Run(ctx, floorAddr, "/api/campaigns/send", small, o.Conns, o.Warmup, o.Measure)
	_ = floor.Stop()
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	fmt.Fprintf(w, "floor    10 contacts: %s\n", floorRes)
	if err := purge(); err != nil {
		return err
	}

	bin := o.GatewayBinary
	if bin == "" {
		dir, err := os.MkdirTemp("", "gateway-bench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "gateway")
		// Run from services/gateway (make bench-gateway does).
		if err := serviceproc.Build(ctx, ".", bin, os.Stderr); err != nil {
			return err
		}
	}
	gwAddr, err := serviceproc.FreeAddr()
	if err != nil {
		return err
	}
	gw, err := serviceproc.Start(ctx, serviceproc.Options{Name: "gateway", Bin: bin, Env: append(env, "PARLEY_GATEWAY_ADDR="+gwAddr),
		Probe: "http://" + gwAddr + "/readyz", Output: os.Stderr})
	if err != nil {
		return err
	}
	defer func() { _ = gw.Stop() }()
	gwSmall, err := Run(ctx, gwAddr, "/api/campaigns/send", small, o.Conns, o.Warmup, o.Measure)
	if err != nil {
		return fmt.Errorf("gateway 10 contacts: %w", err)
	}
	fmt.Fprintf(w, "gateway  10 contacts: %s\n", gwSmall)
	if err := purge(); err != nil {
		return err
	}
	gwLarge, err := Run(ctx, gwAddr, "/api/campaigns/send", large, o.Conns, o.Warmup, o.Measure)
	if err != nil {
		return fmt.Errorf("gateway 1000 contacts: %w", err)
	}
	fmt.Fprintf(w, "gateway 1000 contacts: %s\n", gwLarge)
	fmt.Fprintf(w, "ratio gateway/floor at 10 contacts: %.2fx req/s (target >= 1.20x), p99 %.2f ms vs floor %.2f ms (target: no worse)\n",
		gwSmall.ReqPerSec/floorRes.ReqPerSec, ms(gwSmall.P99), ms(floorRes.P99))
	return nil
}

// RunFloorProcess is the floor's process: env says where to listen and publish.
func RunFloorProcess(ctx context.Context) error {
	_, redisAddr, natsURL := serverURLs()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, PoolSize: 128})
	defer rdb.Close()
	nc, err := bus.Connect(bus.Config{URL: natsURL}, "gateway-bench-floor")
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", os.Getenv("PARLEY_BENCH_FLOOR_ADDR"))
	if err != nil {
		return err
	}
	return NewFloor(rdb, js, os.Getenv("PARLEY_BENCH_FLOOR_SUBJECT")).Serve(ctx, ln)
}
