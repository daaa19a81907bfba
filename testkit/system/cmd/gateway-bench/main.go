// gateway-bench measures the gateway on loopback, with the real service
// binaries it builds (testkit/system/loadtest holds the measurements; the
// doc of each run's function there says what it measures):
//
//	gateway-bench [flags]            make bench-gateway: the gateway against its floor (loadtest.Bench)
//	gateway-bench revoke [flags]     make bench-revoke: revoke-to-401 (loadtest.RevokeBench)
//	gateway-bench capacity [flags]   make capacity: CPU, writes and WAL per unit of work (loadtest.Capacity)
//	gateway-bench nats-kill [flags]  make bench-gateway-nats-kill: every 202 survives a nats-server kill (loadtest.NATSKill)
//
// "floor" is the bare handler the first run compares against; it runs
// this binary as a child process.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/parleyhq/parley/testkit/system/loadtest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sub, args := "", os.Args[1:]
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	var err error
	switch sub {
	case "":
		err = run(ctx, args, loadtest.ParseBench, loadtest.Bench)
	case "floor":
		err = loadtest.RunFloorProcess(ctx)
	case "revoke":
		err = run(ctx, args, loadtest.ParseRevoke, loadtest.RevokeBench)
	case "capacity":
		err = run(ctx, args, loadtest.ParseCapacity, loadtest.Capacity)
	case "nats-kill":
		err = run(ctx, args, loadtest.ParseNATSKill, loadtest.NATSKill)
	default:
		err = fmt.Errorf("no subcommand %q: revoke, capacity, nats-kill or none", sub)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", strings.TrimSpace("gateway-bench "+sub), err)
		os.Exit(1)
	}
}

// run parses a run's options from its flags and runs it, printing to stdout.
func run[O any](ctx context.Context, args []string, parse func([]string) (O, error), bench func(context.Context, O, io.Writer) error) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	return bench(ctx, o, os.Stdout)
}
