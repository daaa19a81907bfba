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
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/serviceproc"
	"github.com/parleyhq/parley/pkg/store"
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
	env := []string{
		"PARLEY_POSTGRES_URL=" + dbURL,
		"PARLEY_REDIS_ADDR=" + redisAddr,
		"PARLEY_REDIS_KEY_PREFIX=" + redisPrefix,
		"PARLEY_NATS_URL=" + natsURL,
		"PARLEY_NATS_STREAM=" + busCfg.Stream,
		"PARLEY_NATS_SUBJECT_PREFIX=" + busCfg.Prefix,
		"PARLEY_LOG_LEVEL=warn",
		"PARLEY_GATEWAY_ACCESS_LOG=false",
	}

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
