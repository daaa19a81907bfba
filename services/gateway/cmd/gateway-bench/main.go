// gateway-bench measures the gateway on loopback.
//
// Without a subcommand (make bench-gateway) it measures POST
// /api/campaigns/send: it provisions companies with keys in a scratch
// database, then alternates the floor (a bare Gin handler doing one
// redis_rate Allow and one synchronous JetStream publish) and the real
// gateway binary at 10 contacts per request over rounds, runs the gateway
// at 1000 contacts, and prints the figures, the CPU per request and the
// median ratio.
//
// "gateway-bench revoke" (make bench-revoke) measures revoke-to-401: three
// gateway processes under load from many companies' keys, an admin process
// whose JSON API revokes one company's key at a time, and for each gateway
// the time from the revoke call returning to its first 401 for that key;
// then the same with the broadcast lost, where the cache TTL bounds it. It
// prints p50, p99 and max per gateway and overall, and exits 1 when a time
// with the broadcast reaches the target (100 ms).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/parleyhq/parley/services/gateway/internal/loadtest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sub := ""
	if len(os.Args) > 1 {
		sub = os.Args[1]
	}
	var err error
	switch sub {
	case "floor":
		err = loadtest.RunFloorProcess(ctx)
	case "revoke":
		err = revoke(ctx, os.Args[2:])
	default:
		err, sub = throughput(ctx, os.Args[1:]), ""
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", strings.TrimSpace("gateway-bench "+sub), err)
		os.Exit(1)
	}
}

func throughput(ctx context.Context, args []string) error {
	var o loadtest.BenchOptions
	fs := flag.NewFlagSet("gateway-bench", flag.ExitOnError)
	fs.IntVar(&o.Companies, "companies", 2000, "companies provisioned, each with a key and a campaign")
	fs.IntVar(&o.Conns, "conns", 64, "keep-alive connections of the load generator")
	fs.DurationVar(&o.Warmup, "warmup", 3*time.Second, "time driven before measuring")
	fs.DurationVar(&o.Measure, "measure", 10*time.Second, "measured time per scenario")
	fs.IntVar(&o.Rounds, "rounds", 3, "alternating floor and gateway runs at 10 contacts (the median ratio is reported)")
	fs.StringVar(&o.GatewayBinary, "gateway", "", "gateway binary (default: built from this module)")
	fs.DurationVar(&o.RedisTimeout, "redis-timeout", time.Second, "the gateway's PARLEY_REDIS_TIMEOUT: every limit decision must be Redis's (a fallback fails the run); 50ms is production's")
	_ = fs.Parse(args)
	return loadtest.Bench(ctx, o, os.Stdout)
}

func revoke(ctx context.Context, args []string) error {
	var o loadtest.RevokeOptions
	fs := flag.NewFlagSet("gateway-bench revoke", flag.ExitOnError)
	fs.IntVar(&o.Gateways, "gateways", 3, "gateway processes")
	fs.IntVar(&o.Companies, "companies", 1000, "companies whose keys carry the background load")
	fs.Float64Var(&o.Rate, "rate", 300, "background load per gateway, requests per second")
	fs.IntVar(&o.Conns, "conns", 4, "connections of the background load per gateway")
	fs.IntVar(&o.Rounds, "rounds", 20, "keys revoked with the broadcast working")
	fs.IntVar(&o.FallbackRounds, "fallback-rounds", 10, "keys revoked with the broadcast lost")
	fs.DurationVar(&o.FallbackTTL, "fallback-ttl", time.Second, "PARLEY_GATEWAY_CACHE_TTL of the gateways that miss the broadcast")
	fs.DurationVar(&o.Target, "target", 100*time.Millisecond, "revoke-to-401 target with the broadcast")
	_ = fs.Parse(args)
	if o.Gateways < 1 || o.Companies < 1 || o.Rate <= 0 || o.Conns < 1 || o.Rounds < 1 || o.FallbackRounds < 1 || o.FallbackTTL <= 0 {
		return fmt.Errorf("every count, rate and duration must be positive")
	}
	return loadtest.RevokeBench(ctx, o, os.Stdout)
}
