package loadtest

import (
	"errors"
	"flag"
	"time"
)

// The command line of each gateway-bench run: its flags parsed into its
// options (flag.ExitOnError: a bad flag exits 2, -h prints them), with
// make's defaults, and the options checked.

// ParseBench reads the options of make bench-gateway.
func ParseBench(args []string) (BenchOptions, error) {
	var o BenchOptions
	fs := flag.NewFlagSet("gateway-bench", flag.ExitOnError)
	fs.IntVar(&o.Companies, "companies", 2000, "companies provisioned, each with a key and a campaign")
	fs.IntVar(&o.Conns, "conns", 64, "keep-alive connections of the load generator")
	fs.DurationVar(&o.Warmup, "warmup", 3*time.Second, "time driven before measuring")
	fs.DurationVar(&o.Measure, "measure", 10*time.Second, "measured time per scenario")
	fs.IntVar(&o.Rounds, "rounds", 3, "alternating floor and gateway runs at 10 contacts (the median ratio is reported)")
	fs.StringVar(&o.GatewayBinary, "gateway", "", "gateway binary (default: built from services/gateway)")
	fs.DurationVar(&o.RedisTimeout, "redis-timeout", time.Second, "the gateway's PARLEY_REDIS_TIMEOUT: every limit decision must be Redis's (a fallback fails the run); 50ms is production's")
	privateServerFlags(fs, &o.NATSServer, &o.PortBase, 8520)
	fs.BoolVar(&o.Shared, "shared", false, "run on the shared local servers (their NATS's own sync_interval) instead of private ones with sync_interval always")
	_ = fs.Parse(args)
	return o, nil
}

// ParseRevoke reads the options of make bench-revoke.
func ParseRevoke(args []string) (RevokeOptions, error) {
	var o RevokeOptions
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
		return o, errors.New("every count, rate and duration must be positive")
	}
	return o, nil
}

// ParseCapacity reads the options of make capacity.
func ParseCapacity(args []string) (CapacityOptions, error) {
	var o CapacityOptions
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
		return o, errors.New("-nats-server is required (make capacity builds and passes the pinned one)")
	}
	if o.Companies < 1 || o.Conns < 1 || o.Measure <= 0 || o.AccountThroughput < 1 || o.Timeout <= 0 || o.Triggers < 0 {
		return o, errors.New("every count, rate and duration must be positive")
	}
	return o, nil
}

// ParseNATSKill reads the options of make bench-gateway-nats-kill.
func ParseNATSKill(args []string) (NATSKillOptions, error) {
	var o NATSKillOptions
	fs := flag.NewFlagSet("gateway-bench nats-kill", flag.ExitOnError)
	privateServerFlags(fs, &o.NATSServer, &o.PortBase, 8510)
	fs.IntVar(&o.Companies, "companies", 2000, "companies provisioned, each with a key and a campaign")
	fs.IntVar(&o.Conns, "conns", 32, "concurrent requests of the load")
	fs.DurationVar(&o.Before, "before", 5*time.Second, "load before nats-server is killed")
	fs.DurationVar(&o.Down, "down", 2*time.Second, "how long nats-server stays dead")
	fs.DurationVar(&o.After, "after", 5*time.Second, "load after nats-server is restarted")
	_ = fs.Parse(args)
	if o.NATSServer == "" {
		return o, errors.New("-nats-server is required (make bench-gateway-nats-kill builds and passes the pinned one)")
	}
	if o.Companies < 1 || o.Conns < 1 || o.Before <= 0 || o.Down < 0 || o.After <= 0 {
		return o, errors.New("every count and duration must be positive")
	}
	return o, nil
}

// privateServerFlags are the flags of the private servers a run starts:
// the nats-server binary and where their ports begin.
func privateServerFlags(fs *flag.FlagSet, natsServer *string, portBase *int, base int) {
	fs.StringVar(natsServer, "nats-server", "", "the nats-server binary of the private servers (make passes bin/nats-server-<version>)")
	fs.IntVar(portBase, "port-base", base, "the private servers listen on port-base+1 (NATS), +2 (its monitoring), +3 (Redis), +4 (PostgreSQL)")
}
