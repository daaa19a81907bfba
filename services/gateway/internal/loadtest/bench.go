package loadtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/store"
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
	tagBytes := make([]byte, 4)
	_, _ = rand.Read(tagBytes)
	tag := hex.EncodeToString(tagBytes)
	pgAdmin, redisAddr, natsURL := serverURLs()

	dbURL, dropDB, err := scratchDatabase(ctx, pgAdmin, "parley_bench_"+tag)
	if err != nil {
		return err
	}
	defer dropDB()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	fmt.Fprintf(w, "provisioning %d companies with keys and campaigns...\n", o.Companies)
	tenants, err := Provision(ctx, pool, o.Companies, tag)
	if err != nil {
		return err
	}
	small, large := CampaignRequests(tenants, 10), CampaignRequests(tenants, 1000)

	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	redisPrefix := "bench:" + tag + ":"
	defer deleteKeys(context.WithoutCancel(ctx), rdb, redisPrefix)

	nc, err := bus.Connect(bus.Config{URL: natsURL}, "gateway-bench")
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	busCfg := bus.Config{URL: natsURL, Stream: "BENCH_" + tag, Prefix: "bench" + tag, StreamReplicas: 1}
	defer func() { _ = js.DeleteStream(context.WithoutCancel(ctx), busCfg.Stream) }()
	if _, err := bus.EnsureStream(ctx, js, busCfg); err != nil {
		return err
	}
	purge := func() error {
		s, err := js.Stream(ctx, busCfg.Stream)
		if err != nil {
			return err
		}
		return s.Purge(ctx)
	}
	env := append(os.Environ(),
		"PARLEY_POSTGRES_URL="+dbURL,
		"PARLEY_REDIS_ADDR="+redisAddr,
		"PARLEY_REDIS_KEY_PREFIX="+redisPrefix,
		"PARLEY_NATS_URL="+natsURL,
		"PARLEY_NATS_STREAM="+busCfg.Stream,
		"PARLEY_NATS_SUBJECT_PREFIX="+busCfg.Prefix,
		"PARLEY_LOG_LEVEL=warn",
		"PARLEY_GATEWAY_ACCESS_LOG=false",
	)

	fmt.Fprintf(w, "load: %d connections, %s warm-up, %s measured per scenario, %d companies, %d rounds\n",
		o.Conns, o.Warmup, o.Measure, o.Companies, o.Rounds)
	// The floor and the gateway run side by side as separate processes; the
	// load alternates between them round by round, so that whatever else the
	// machine is doing weighs on both alike.
	floorAddr, err := freeAddr()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	floor, err := startProcess(ctx, self, []string{"floor"}, append(env, "PARLEY_BENCH_FLOOR_ADDR="+floorAddr,
		"PARLEY_BENCH_FLOOR_SUBJECT="+busCfg.CampaignSubject(0)), "http://"+floorAddr+"/healthz", http.StatusNotFound)
	if err != nil {
		return fmt.Errorf("start floor: %w", err)
	}
	defer floor.stop()

	bin := o.GatewayBinary
	if bin == "" {
		dir, err := os.MkdirTemp("", "gateway-bench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "gateway")
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build gateway (run from services/gateway): %w", err)
		}
	}
	gwAddr, err := freeAddr()
	if err != nil {
		return err
	}
	gw, err := startProcess(ctx, bin, nil, append(env, "PARLEY_GATEWAY_ADDR="+gwAddr), "http://"+gwAddr+"/readyz", http.StatusOK)
	if err != nil {
		return fmt.Errorf("start gateway: %w", err)
	}
	defer gw.stop()

	var ratios, floorP99, gwP99 []float64
	for round := 1; round <= o.Rounds; round++ {
		floorRes, err := Run(ctx, floorAddr, "/api/campaigns/send", small, o.Conns, o.Warmup, o.Measure, floor.cmd.Process.Pid)
		if err != nil {
			return fmt.Errorf("floor: %w", err)
		}
		fmt.Fprintf(w, "round %d floor    10 contacts: %s\n        cpu/req by process: %s\n", round, floorRes, floorRes.ByCommand)
		if err := purge(); err != nil {
			return err
		}
		gwRes, err := Run(ctx, gwAddr, "/api/campaigns/send", small, o.Conns, o.Warmup, o.Measure, gw.cmd.Process.Pid)
		if err != nil {
			return fmt.Errorf("gateway 10 contacts: %w", err)
		}
		fmt.Fprintf(w, "round %d gateway  10 contacts: %s\n        cpu/req by process: %s\n", round, gwRes, gwRes.ByCommand)
		if err := purge(); err != nil {
			return err
		}
		ratios = append(ratios, gwRes.ReqPerSec/floorRes.ReqPerSec)
		floorP99, gwP99 = append(floorP99, ms(floorRes.P99)), append(gwP99, ms(gwRes.P99))
		fmt.Fprintf(w, "round %d ratio gateway/floor: %.2fx req/s; p99 %.2f ms vs %.2f ms\n", round, ratios[len(ratios)-1], ms(gwRes.P99), ms(floorRes.P99))
	}
	gwLarge, err := Run(ctx, gwAddr, "/api/campaigns/send", large, o.Conns, o.Warmup, o.Measure, gw.cmd.Process.Pid)
	if err != nil {
		return fmt.Errorf("gateway 1000 contacts: %w", err)
	}
	fmt.Fprintf(w, "gateway 1000 contacts: %s\n", gwLarge)
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

type process struct{ cmd *exec.Cmd }

func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// startProcess runs bin and waits until probe answers want.
func startProcess(ctx context.Context, bin string, args, env []string, probe string, want int) (*process, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		resp, err := http.Get(probe)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == want {
				return p, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.stop()
	return nil, fmt.Errorf("%s did not answer %d at %s within 30s", bin, want, probe)
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func scratchDatabase(ctx context.Context, adminURL, name string) (string, func(), error) {
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", nil, fmt.Errorf("connect %s: %w", adminURL, err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, err
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", nil, err
	}
	u.Path = "/" + name
	drop := func() {
		c, err := pgx.Connect(context.Background(), adminURL)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}
	if _, err := store.Migrate(ctx, u.String()); err != nil {
		drop()
		return "", nil, err
	}
	return u.String(), drop, nil
}

func deleteKeys(ctx context.Context, rdb *redis.Client, prefix string) {
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
		if len(keys) == 1000 {
			rdb.Del(ctx, keys...)
			keys = keys[:0]
		}
	}
	if len(keys) > 0 {
		rdb.Del(ctx, keys...)
	}
}
