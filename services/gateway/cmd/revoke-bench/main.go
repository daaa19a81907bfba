// revoke-bench measures revoke-to-401 (make bench-revoke): three gateway
// processes under load from many companies' keys, an admin process whose
// JSON API revokes one company's key at a time, and for each gateway the
// time from the revoke call returning to its first 401 for that key; then
// the same with the broadcast lost, where the cache TTL bounds it. It prints
// p50, p99 and max per gateway and overall, and exits 1 when a time with the
// broadcast reaches the target (100 ms).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/parleyhq/parley/services/gateway/internal/loadtest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var o loadtest.RevokeOptions
	flag.IntVar(&o.Gateways, "gateways", 3, "gateway processes")
	flag.IntVar(&o.Companies, "companies", 1000, "companies whose keys carry the background load")
	flag.Float64Var(&o.Rate, "rate", 300, "background load per gateway, requests per second")
	flag.IntVar(&o.Conns, "conns", 4, "connections of the background load per gateway")
	flag.IntVar(&o.Rounds, "rounds", 20, "keys revoked with the broadcast working")
	flag.IntVar(&o.FallbackRounds, "fallback-rounds", 10, "keys revoked with the broadcast lost")
	flag.DurationVar(&o.FallbackTTL, "fallback-ttl", time.Second, "PARLEY_GATEWAY_CACHE_TTL of the gateways that miss the broadcast")
	flag.DurationVar(&o.Target, "target", 100*time.Millisecond, "revoke-to-401 target with the broadcast")
	flag.Parse()
	if o.Gateways < 1 || o.Companies < 1 || o.Rate <= 0 || o.Conns < 1 || o.Rounds < 1 || o.FallbackRounds < 1 || o.FallbackTTL <= 0 {
		fmt.Fprintln(os.Stderr, "bench-revoke: every count, rate and duration must be positive")
		os.Exit(2)
	}
	if err := loadtest.RevokeBench(ctx, o, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "bench-revoke: %v\n", err)
		os.Exit(1)
	}
}
