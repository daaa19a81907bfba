// gateway-bench measures POST /api/campaigns/send on loopback (make
// bench-gateway): it provisions companies with keys in a scratch database,
// measures the floor (a bare Gin handler doing one redis_rate Allow and one
// synchronous JetStream publish), then the real gateway binary with 10 and
// with 1000 contacts per request, and prints the figures and the ratio.
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
	if len(os.Args) > 1 && os.Args[1] == "floor" {
		if err := loadtest.RunFloorProcess(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "floor: %v\n", err)
			os.Exit(1)
		}
		return
	}
	var o loadtest.BenchOptions
	flag.IntVar(&o.Companies, "companies", 2000, "companies provisioned, each with a key and a campaign")
	flag.IntVar(&o.Conns, "conns", 64, "keep-alive connections of the load generator")
	flag.DurationVar(&o.Warmup, "warmup", 3*time.Second, "time driven before measuring")
	flag.DurationVar(&o.Measure, "measure", 10*time.Second, "measured time per scenario")
	flag.IntVar(&o.Rounds, "rounds", 3, "alternating floor and gateway runs at 10 contacts (the median ratio is reported)")
	flag.StringVar(&o.GatewayBinary, "gateway", "", "gateway binary (default: built from this module)")
	flag.Parse()
	if err := loadtest.Bench(ctx, o, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "bench-gateway: %v\n", err)
		os.Exit(1)
	}
}
