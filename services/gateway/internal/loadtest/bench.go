package loadtest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/testkit/serviceproc"
)

// BenchOptions are the knobs of make bench-gateway.
type BenchOptions struct {
	Companies     int
	Conns         int
	Warmup        time.Duration
	Measure       time.Duration
	GatewayBinary string
	// Rounds alternates floor and gateway runs at 10 contacts this many times.
	Rounds int
	// RedisTimeout is the gateway's PARLEY_REDIS_TIMEOUT. The bench measures
	// every decision made in Redis: a scheduling stall of a shared machine
	// past the production 50 ms would make the limiter decide locally, which
	// fails the run; a longer bound shows the stall as latency instead.
	RedisTimeout time.Duration
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
// It returns an error, and so make bench-gateway fails, when a measured run
// got any answer but 202 or the gateway's rate limiter fell back
// (parley_ratelimit_fallback_total moved).
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
	if o.RedisTimeout > 0 {
		env = append(env, "PARLEY_REDIS_TIMEOUT="+o.RedisTimeout.String())
	}

	fmt.Fprintf(w, "load: %d connections, %s warm-up, %s measured per scenario, %d companies, %d rounds; gateway PARLEY_REDIS_TIMEOUT=%s\n",
		o.Conns, o.Warmup, o.Measure, o.Companies, o.Rounds, o.RedisTimeout)
	// The floor and the gateway run side by side as separate processes; the
	// load alternates between them round by round, so that whatever else the
	// machine is doing weighs on both alike.
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
	defer func() { _ = floor.Stop() }()

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

	// measured drives one scenario and fails it on any answer but 202 and,
	// on the gateway, on any rate-limit fallback: throughput of wrong
	// answers, or of a limiter that skipped Redis, is not the figure.
	measured := func(name, addr string, reqs []Request, pid int, gateway bool) (Result, error) {
		var guard fallbackGuard
		if gateway {
			if guard, err = guardFallbacks(ctx, addr); err != nil {
				return Result{}, fmt.Errorf("%s: %w", name, err)
			}
		}
		res, err := Run(ctx, addr, "/api/campaigns/send", reqs, o.Conns, o.Warmup, o.Measure, pid)
		if err != nil {
			return res, fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprintf(w, "%s: %s\n        cpu/req by process: %s\n", name, res, res.ByCommand)
		if err := res.Wrong(); err != nil {
			return res, fmt.Errorf("%s: %w", name, err)
		}
		if gateway {
			if err := guard.check(ctx); err != nil {
				return res, fmt.Errorf("%s: %w", name, err)
			}
		}
		return res, nil
	}

	var ratios, floorP99, gwP99 []float64
	for round := 1; round <= o.Rounds; round++ {
		floorRes, err := measured(fmt.Sprintf("round %d floor    10 contacts", round), floorAddr, small, floor.Pid(), false)
		if err != nil {
			return err
		}
		if err := purge(); err != nil {
			return err
		}
		gwRes, err := measured(fmt.Sprintf("round %d gateway  10 contacts", round), gwAddr, small, gw.Pid(), true)
		if err != nil {
			return err
		}
		if err := purge(); err != nil {
			return err
		}
		ratios = append(ratios, gwRes.ReqPerSec/floorRes.ReqPerSec)
		floorP99, gwP99 = append(floorP99, ms(floorRes.P99)), append(gwP99, ms(gwRes.P99))
		fmt.Fprintf(w, "round %d ratio gateway/floor: %.2fx req/s; p99 %.2f ms vs %.2f ms\n", round, ratios[len(ratios)-1], ms(gwRes.P99), ms(floorRes.P99))
	}
	if _, err := measured("gateway 1000 contacts", gwAddr, large, gw.Pid(), true); err != nil {
		return err
	}
	fmt.Fprintf(w, "median over %d rounds at 10 contacts: gateway/floor %.2fx req/s (target >= 1.20x); p99 gateway %.2f ms vs floor %.2f ms (target: no worse)\n",
		o.Rounds, median(ratios), median(gwP99), median(floorP99))
	return nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
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
