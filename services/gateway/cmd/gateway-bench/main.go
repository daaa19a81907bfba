// gateway-bench measures the gateway on loopback.
//
// Without a subcommand (make bench-gateway) it measures POST
// /api/campaigns/send on private servers as production runs them (the
// pinned nats-server with sync_interval always; -shared: the shared local
// servers): it provisions companies with keys in a scratch database, then
// alternates the floor (a bare Gin handler doing one redis_rate Allow and
// one synchronous JetStream publish), the gateway with its group commit off
// and the gateway, at 10 contacts per request over rounds, then one
// connection each, then the gateway at 1000 contacts; it prints the
// figures, the CPU per request by process, the batches per stream message
// and the median ratio, and fails when a target is missed (the ratio
// loadtest.TargetRatio, a p99 worse than the floor's, a lone connection's
// p50 beyond loadtest.TargetLoneSlack).
//
// "gateway-bench revoke" (make bench-revoke) measures revoke-to-401: three
// gateway processes under load from many companies' keys, an admin process
// whose JSON API revokes one company's key at a time, and for each gateway
// the time from the revoke call returning to its first 401 for that key;
// then the same with the broadcast lost, where the cache TTL bounds it. It
// prints p50, p99 and max per gateway and overall, and exits 1 when a time
// with the broadcast reaches the target (100 ms).
//
// "gateway-bench capacity" (make capacity) measures what docs/capacity.md
// is built on: on a private nats-server, redis-server and PostgreSQL
// cluster, the CPU each process spends per gateway request (10 and 1000
// contacts), per message a campaign dispatcher sends and per automation
// trigger (with the status callbacks through the gateway), PostgreSQL's
// commits, rows and WAL bytes per message, and JetStream's stored messages. CPU is read from /proc per
// process tree, so the figures hold on a busy machine; any error answer,
// lost or duplicated message fails the run.
//
// "gateway-bench nats-kill" (make bench-gateway-nats-kill) runs campaign
// sends against the gateway on a private nats-server (file storage,
// sync_interval always), SIGKILLs nats-server mid-run, restarts it on its
// store, and reads the stream: every batch id answered 202 must be in it
// (it prints the 202s, the other answers by status and found/missing, and
// exits 1 when any 202 is missing).
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
	case "capacity":
		err = capacity(ctx, os.Args[2:])
	case "nats-kill":
		err = natsKill(ctx, os.Args[2:])
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
	privateServerFlags(fs, &o.NATSServer, &o.PortBase, 8520)
	fs.BoolVar(&o.Shared, "shared", false, "run on the shared local servers (their NATS's own sync_interval) instead of private ones with sync_interval always")
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

func capacity(ctx context.Context, args []string) error {
	var o loadtest.CapacityOptions
	fs := flag.NewFlagSet("gateway-bench capacity", flag.ExitOnError)
	privateServerFlags(fs, &o.NATSServer, &o.PortBase, 8500)
	fs.IntVar(&o.Companies, "companies", 1000, "companies provisioned, each with a key, a number and a campaign")
	fs.IntVar(&o.Conns, "conns", 32, "keep-alive connections of the 10-contact load")
	fs.DurationVar(&o.Warmup, "warmup", 3*time.Second, "time driven before measuring the 10-contact load")
	fs.DurationVar(&o.Measure, "measure", 15*time.Second, "measured time of the 10-contact load")
	fs.IntVar(&o.Messages, "messages", 50_000, "campaign messages sent (a multiple of 1000: one 1000-contact request per company)")
	fs.IntVar(&o.AccountThroughput, "account-throughput", 80, "each number's messages per second (WhatsApp's default is 80)")
	fs.BoolVar(&o.Statuses, "statuses", true, "provider-sim posts sent, delivered and read for every message to the gateway")
	fs.IntVar(&o.Triggers, "triggers", 20_000, "automation triggers of one new contact each, spread over the companies (0: no automation phase)")
	fs.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "longest wait for the campaign")
	_ = fs.Parse(args)
	if o.NATSServer == "" {
		return fmt.Errorf("-nats-server is required (make capacity builds and passes the pinned one)")
	}
	if o.Companies < 1 || o.Conns < 1 || o.Measure <= 0 || o.AccountThroughput < 1 || o.Timeout <= 0 || o.Triggers < 0 {
		return fmt.Errorf("every count, rate and duration must be positive")
	}
	return loadtest.Capacity(ctx, o, os.Stdout)
}

func natsKill(ctx context.Context, args []string) error {
	var o loadtest.NATSKillOptions
	fs := flag.NewFlagSet("gateway-bench nats-kill", flag.ExitOnError)
	privateServerFlags(fs, &o.NATSServer, &o.PortBase, 8510)
	fs.IntVar(&o.Companies, "companies", 2000, "companies provisioned, each with a key and a campaign")
	fs.IntVar(&o.Conns, "conns", 32, "concurrent requests of the load")
	fs.DurationVar(&o.Before, "before", 5*time.Second, "load before nats-server is killed")
	fs.DurationVar(&o.Down, "down", 2*time.Second, "how long nats-server stays dead")
	fs.DurationVar(&o.After, "after", 5*time.Second, "load after nats-server is restarted")
	_ = fs.Parse(args)
	if o.NATSServer == "" {
		return fmt.Errorf("-nats-server is required (make bench-gateway-nats-kill builds and passes the pinned one)")
	}
	if o.Companies < 1 || o.Conns < 1 || o.Before <= 0 || o.Down < 0 || o.After <= 0 {
		return fmt.Errorf("every count and duration must be positive")
	}
	return loadtest.NATSKill(ctx, o, os.Stdout)
}

// privateServerFlags are the flags of the private servers a run starts:
// the nats-server binary and where their ports begin.
func privateServerFlags(fs *flag.FlagSet, natsServer *string, portBase *int, base int) {
	fs.StringVar(natsServer, "nats-server", "", "the nats-server binary of the private servers (make passes bin/nats-server-<version>)")
	fs.IntVar(portBase, "port-base", base, "the private servers listen on port-base+1 (NATS), +2 (its monitoring), +3 (Redis), +4 (PostgreSQL)")
}
