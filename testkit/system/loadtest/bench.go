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
	"strings"
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
	// Rounds alternates the floor and the gateway (without and with group
	// commit) at 10 contacts this many times.
	Rounds int
	// RedisTimeout is the gateway's PARLEY_REDIS_TIMEOUT. The bench measures
	// every decision made in Redis: a scheduling stall of a shared machine
	// past the production 50 ms would make the limiter decide locally, which
	// fails the run; a longer bound shows the stall as latency instead.
	RedisTimeout time.Duration
	// NATSServer is the nats-server binary of the private servers (make
	// passes the pinned one); PortBase places their ports.
	NATSServer string
	PortBase   int
	// Shared runs on the shared local servers (their NATS with its default
	// sync_interval) instead of private ones with sync_interval always.
	Shared bool
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

// The targets make bench-gateway asserts: what the group commit must give
// over the bare floor, and what it may cost a request.
const (
	// TargetRatio is the gateway's least requests per second over the
	// floor's (median of the rounds).
	TargetRatio = 1.2
	// TargetLoneSlack is how much the group commit may add to the p50 of a
	// lone connection's requests, over the same gateway with it off: with
	// nothing to group nothing waits, and what is left is noise.
	TargetLoneSlack = 1.10
)

// benchProc is one server the load is driven against.
type benchProc struct {
	name    string
	addr    string
	proc    *serviceproc.Process
	gateway bool
}

// Bench runs the floor and the gateway scenarios and writes a report to w.
// Everything it creates (database, streams, Redis keys, private servers) is
// removed after. By default it runs on private servers as production runs
// (the pinned nats-server with sync_interval always, so that a 202 survives
// a power cut); o.Shared runs on the shared local ones. Three servers take
// the load in turn, round by round: the floor (a bare Gin handler: one
// redis_rate call, one synchronous JetStream publish), the gateway with its
// group commit off (PARLEY_GATEWAY_GROUP_MAX_BATCHES=1: one stream message
// per request, the design before the group commit) and the gateway, at o.Conns
// connections over rounds; then at one connection (latency with nothing to
// group) in short slices taken in turn; then the gateway at 1000 contacts. It returns an error, and so make bench-gateway fails, when a
// measured run got any answer but 202 or the gateway's rate limiter fell
// back (parley_ratelimit_fallback_total moved), or when the median ratio
// gateway/floor is under TargetRatio, the gateway's median p99 at 64
// connections is worse than the floor's, or at one connection its p50 is
// over TargetLoneSlack times the p50 without group commit.
func Bench(ctx context.Context, o BenchOptions, w io.Writer) error {
	pgAdmin, redisAddr, natsURL := serverURLs()
	where := "the shared local servers (their nats-server with its own sync_interval)"
	if !o.Shared {
		if o.NATSServer == "" {
			return fmt.Errorf("-nats-server is required (make bench-gateway builds and passes the pinned one), or -shared")
		}
		srv, err := startPrivateServers(ctx, o.NATSServer, o.PortBase)
		if err != nil {
			return err
		}
		defer srv.stop()
		pgAdmin, redisAddr, natsURL = srv.pgAdminURL, srv.redisAddr, srv.natsURL
		where = fmt.Sprintf("private servers: %s (file storage, sync_interval always, as in production), redis-server %s, PostgreSQL :%d",
			filepath.Base(o.NATSServer), srv.redisAddr, srv.pgPort)
	}
	sc, err := newScratchAt(ctx, "bench", o.Companies, w, pgAdmin, redisAddr, natsURL)
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

	fmt.Fprintf(w, "on %s\n", where)
	fmt.Fprintf(w, "load: %d connections, %s warm-up, %s measured per scenario, %d companies, %d rounds; gateway PARLEY_REDIS_TIMEOUT=%s\n",
		o.Conns, o.Warmup, o.Measure, o.Companies, o.Rounds, o.RedisTimeout)
	procs, err := startBenchProcs(ctx, o, env, busCfg)
	for _, p := range procs {
		defer func() { _ = p.proc.Stop() }()
	}
	if err != nil {
		return err
	}
	gw := procs[2]

	// measured drives one scenario and fails it on any answer but 202 and,
	// on a gateway, on any rate-limit fallback: throughput of wrong answers,
	// or of a limiter that skipped Redis, is not the figure. It prints the
	// batches per stream message of a gateway.
	measured := func(label string, p benchProc, reqs []Request, conns int) (Result, error) {
		name := label + " " + p.name
		var guard fallbackGuard
		var batches0, msgs0 float64
		if p.gateway {
			if guard, err = guardFallbacks(ctx, p.addr); err != nil {
				return Result{}, fmt.Errorf("%s: %w", name, err)
			}
			if batches0, msgs0, err = groupCounts(ctx, p.addr); err != nil {
				return Result{}, fmt.Errorf("%s: %w", name, err)
			}
		}
		res, err := Run(ctx, p.addr, "/api/campaigns/send", reqs, conns, o.Warmup, o.Measure, p.proc.Pid())
		if err != nil {
			return res, fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprintf(w, "%-36s %s\n        cpu/req by process: %s\n", name+":", res, res.ByCommand)
		if err := res.Wrong(); err != nil {
			return res, fmt.Errorf("%s: %w", name, err)
		}
		if p.gateway {
			if err := guard.check(ctx); err != nil {
				return res, fmt.Errorf("%s: %w", name, err)
			}
			batches1, msgs1, err := groupCounts(ctx, p.addr)
			if err != nil {
				return res, fmt.Errorf("%s: %w", name, err)
			}
			if msgs1 > msgs0 {
				fmt.Fprintf(w, "        %.0f batches in %.0f stream messages: %.1f per message\n", batches1-batches0, msgs1-msgs0, (batches1-batches0)/(msgs1-msgs0))
			}
		}
		return res, purge()
	}

	var ratios, singleRatios, floorP99, gwP99 []float64
	for round := 1; round <= o.Rounds; round++ {
		label := fmt.Sprintf("round %d, %d conns, 10 contacts:", round, o.Conns)
		var res [3]Result
		for i, p := range procs {
			if res[i], err = measured(label, p, small, o.Conns); err != nil {
				return err
			}
		}
		ratios = append(ratios, res[2].ReqPerSec/res[0].ReqPerSec)
		singleRatios = append(singleRatios, res[1].ReqPerSec/res[0].ReqPerSec)
		floorP99, gwP99 = append(floorP99, ms(res[0].P99)), append(gwP99, ms(res[2].P99))
		fmt.Fprintf(w, "round %d ratio to the floor: gateway %.2fx, gateway without group commit %.2fx req/s; p99 gateway %.2f ms vs floor %.2f ms\n",
			round, ratios[len(ratios)-1], singleRatios[len(singleRatios)-1], ms(res[2].P99), ms(res[0].P99))
	}
	lone, err := loneLatency(ctx, procs, small, purge, w)
	if err != nil {
		return err
	}
	if _, err := measured(fmt.Sprintf("%d conns, 1000 contacts:", o.Conns), gw, large, o.Conns); err != nil {
		return err
	}
	ratio, p99, floorMedP99 := median(ratios), median(gwP99), median(floorP99)
	fmt.Fprintf(w, "median over %d rounds at %d connections, 10 contacts: gateway/floor %.2fx req/s (target >= %.2fx; without group commit %.2fx); p99 gateway %.2f ms vs floor %.2f ms (target: no worse)\n",
		o.Rounds, o.Conns, ratio, TargetRatio, median(singleRatios), p99, floorMedP99)
	fmt.Fprintf(w, "one connection, 10 contacts, median of %d interleaved slices: p50 floor %.3f ms, gateway without group commit %.3f ms, gateway %.3f ms (target: the group commit adds no wait, p50 within %.0f%% of the gateway's without it)\n",
		loneSlices, lone[0], lone[1], lone[2], (TargetLoneSlack-1)*100)
	var missed []string
	if ratio < TargetRatio {
		missed = append(missed, fmt.Sprintf("gateway/floor %.2fx < %.2fx", ratio, TargetRatio))
	}
	if p99 > floorMedP99 {
		missed = append(missed, fmt.Sprintf("p99 %.2f ms > the floor's %.2f ms", p99, floorMedP99))
	}
	if lone[2] > lone[1]*TargetLoneSlack {
		missed = append(missed, fmt.Sprintf("one connection: p50 %.3f ms, over %.3f ms without group commit", lone[2], lone[1]))
	}
	if len(missed) > 0 {
		return fmt.Errorf("target missed: %s", strings.Join(missed, "; "))
	}
	fmt.Fprintln(w, "targets met")
	return nil
}

// loneSlices is how many slices of one connection (1 s of warm-up, 1 s
// measured) each server takes, in turn.
const loneSlices = 9

// loneLatency measures the three servers at one connection (nothing to
// group), in short slices taken in turn so that the machine's drift weighs
// on all alike, and returns each one's median p50 in ms. Any answer but 202,
// or a gateway's rate-limit fallback, fails it.
func loneLatency(ctx context.Context, procs []benchProc, reqs []Request, purge func() error, w io.Writer) ([3]float64, error) {
	var out [3]float64
	var p50s, p99s [3][]float64
	var guards [3]fallbackGuard
	for i, p := range procs {
		if p.gateway {
			g, err := guardFallbacks(ctx, p.addr)
			if err != nil {
				return out, err
			}
			guards[i] = g
		}
	}
	for range loneSlices {
		for i, p := range procs {
			res, err := Run(ctx, p.addr, "/api/campaigns/send", reqs, 1, time.Second, time.Second, p.proc.Pid())
			if err == nil {
				err = res.Wrong()
			}
			if err != nil {
				return out, fmt.Errorf("1 conn %s: %w", p.name, err)
			}
			p50s[i], p99s[i] = append(p50s[i], ms(res.P50)), append(p99s[i], ms(res.P99))
		}
	}
	for i, p := range procs {
		if p.gateway {
			if err := guards[i].check(ctx); err != nil {
				return out, fmt.Errorf("1 conn %s: %w", p.name, err)
			}
		}
		out[i] = median(p50s[i])
		fmt.Fprintf(w, "1 conn, 10 contacts, %d slices of 1 s (after 1 s of warm-up) in turn: %-29s p50 %.3f ms (slices %.3f-%.3f), p99 median %.2f ms\n",
			loneSlices, p.name+":", out[i], slices.Min(p50s[i]), slices.Max(p50s[i]), median(p99s[i]))
	}
	return out, purge()
}

// startBenchProcs starts the floor, the gateway without group commit and
// the gateway, in that order; on error those started are returned too (to
// be stopped).
func startBenchProcs(ctx context.Context, o BenchOptions, env []string, busCfg bus.Config) ([]benchProc, error) {
	var procs []benchProc
	floorAddr, err := serviceproc.FreeAddr()
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	floor, err := serviceproc.Start(ctx, serviceproc.Options{Name: "floor", Bin: self, Args: []string{"floor"},
		Env:   append(env, "PARLEY_BENCH_FLOOR_ADDR="+floorAddr, "PARLEY_BENCH_FLOOR_SUBJECT="+busCfg.CampaignSubject(0)),
		Probe: "http://" + floorAddr + "/healthz", WantStatus: http.StatusNotFound, Output: os.Stderr})
	if err != nil {
		return nil, err
	}
	procs = append(procs, benchProc{name: "floor", addr: floorAddr, proc: floor})

	dir, err := os.MkdirTemp("", "gateway-bench")
	if err != nil {
		return procs, err
	}
	defer os.RemoveAll(dir) // the processes keep their open binaries
	bin := o.GatewayBinary
	if bin == "" {
		bin = filepath.Join(dir, "gateway")
		if err := serviceproc.BuildService(ctx, "gateway", bin, os.Stderr); err != nil {
			return procs, err
		}
	}
	// The same binary under another name, so that the CPU by process tells
	// the two gateways apart.
	singleBin := filepath.Join(dir, "gateway-single")
	raw, err := os.ReadFile(bin)
	if err != nil {
		return procs, err
	}
	if err := os.WriteFile(singleBin, raw, 0o755); err != nil {
		return procs, err
	}
	for _, g := range []struct {
		name, bin string
		env       []string
	}{
		{"gateway without group commit", singleBin, []string{"PARLEY_GATEWAY_GROUP_MAX_BATCHES=1"}},
		{"gateway", bin, nil},
	} {
		addr, err := serviceproc.FreeAddr()
		if err != nil {
			return procs, err
		}
		p, err := serviceproc.Start(ctx, serviceproc.Options{Name: g.name, Bin: g.bin,
			Env:   append(append(slices.Clone(env), g.env...), "PARLEY_GATEWAY_ADDR="+addr),
			Probe: "http://" + addr + "/readyz", Output: os.Stderr})
		if err != nil {
			return procs, err
		}
		procs = append(procs, benchProc{name: g.name, addr: addr, proc: p, gateway: true})
	}
	return procs, nil
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
