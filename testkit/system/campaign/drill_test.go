//go:build drill

package campaign

// Crash drills (make drills): each runs the real dispatcher binary and
// provider-sim with thousands of messages in flight, breaks one part, and
// counts outside the system (testkit/drilltally): every accepted phone
// must reach provider-sim, no message may fail that the drill did not make
// fail, and the provider may get a second send only for the sends it had
// taken but the dispatcher had not recorded at a kill. They print what they
// measured.

import (
	"testing"
	"time"

	"github.com/parleyhq/parley/testkit/drillenv"
	"github.com/parleyhq/parley/testkit/drilltally"
)

const (
	drillBatches   = 10
	drillBatchSize = 1000
	drillRate      = 1000 // the account's throughput, messages per second
)

// report logs the tally and fails the drill on every broken expectation:
// an accepted phone the provider never received, a failed message the
// drill did not provoke, duplicates beyond the bound, sends to strangers,
// a message still open.
func report(t *testing.T, name string, tl drilltally.Tally, expect drilltally.Expect) {
	t.Helper()
	t.Logf("%s: %s (duplicate bound %d)", name, tl, expect.DuplicateBound)
	for _, p := range tl.Problems(expect) {
		t.Errorf("%s: %s", name, p)
	}
}

func publishLoad(e *drillenv.Env, s drillenv.Sender) int {
	for range drillBatches {
		e.PublishCampaign(s, e.NextPhones(drillBatchSize))
	}
	return drillBatches * drillBatchSize
}

// TestDrillDispatcherKill SIGKILLs the dispatcher mid-run and starts it
// again. Rows left in sending are the documented window: the restarted
// dispatcher sends them again once their lease (4 s here) has passed.
func TestDrillDispatcherKill(t *testing.T) {
	e := drillenv.New(t, drillenv.Options{SimEnv: []string{"PARLEY_PROVIDER_SIM_LATENCY=20ms"}})
	s := e.NewSender("kill", drillRate)
	lease := []string{"PARLEY_DISPATCH_LEASE=4s", "PARLEY_DISPATCH_SWEEP_INTERVAL=500ms", "PARLEY_DISPATCH_ACK_WAIT=5s"}
	d, _ := e.StartCampaign(lease...)
	accepted := publishLoad(e, s)
	e.WaitReceived(int64(accepted/5), 60*time.Second)
	d.Kill()
	// Requests the provider had already taken finish on its side.
	time.Sleep(200 * time.Millisecond)
	sending := e.Count(`SELECT count(*) FROM messages WHERE state = 'sending'`)
	atKill := e.Take()
	inFlight := atKill.Accepted - atKill.Rows + atKill.Open
	t.Logf("at the kill: %d of %d contacts expanded, %d not yet final (in flight), %d in sending, %d phones the provider had received whose message was not recorded (the duplicate bound)",
		atKill.Rows, accepted, inFlight, sending, atKill.Unrecorded)
	if inFlight < 5000 {
		t.Errorf("only %d messages in flight at the kill; the drill wants at least 5000", inFlight)
	}
	start := time.Now()
	e.StartCampaign(lease...)
	tl := e.Settle(90 * time.Second)
	t.Logf("settled %s after the restart", time.Since(start).Round(time.Millisecond))
	report(t, "dispatcher SIGKILL", tl, drilltally.Expect{DuplicateBound: int64(atKill.Unrecorded)})
}

// TestDrillNATSRestart stops the NATS server for 3 s right after half the
// batches were published, while batches are still in the stream, taken or
// not, their acks not yet given (the drill fails if every batch was already
// done), and starts it again; batches published before and after are all
// delivered, none twice.
func TestDrillNATSRestart(t *testing.T) {
	e := drillenv.New(t, drillenv.Options{SimEnv: []string{"PARLEY_PROVIDER_SIM_LATENCY=20ms"}})
	s := e.NewSender("nats", drillRate)
	_, addr := e.StartCampaign("PARLEY_DISPATCH_ACK_WAIT=5s")
	stream, err := e.JS.Stream(e.Ctx, e.BusCfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	for range drillBatches / 2 {
		e.PublishCampaign(s, e.NextPhones(drillBatchSize))
	}
	// The stream keeps a batch (work queue) until a dispatcher acks it,
	// which it does once the batch is expanded into rows.
	info, err := stream.Info(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.NATS.Stop()
	stopped := time.Now()
	unacked := info.State.Msgs
	atStop := e.Take()
	t.Logf("at the stop: %d of %d batches not yet acknowledged, %d of %d contacts expanded, %d messages open",
		unacked, drillBatches/2, atStop.Rows, atStop.Accepted, atStop.Open)
	if unacked == 0 {
		t.Fatalf("every batch was acknowledged before NATS stopped: the drill tested nothing in flight (%s)", atStop)
	}
	before := e.SimStats().Accepted
	time.Sleep(3 * time.Second)
	during := e.SimStats().Accepted - before
	e.NATS.Start()
	t.Logf("NATS down %s; the provider received %d sends meanwhile (messages already in PostgreSQL keep going)",
		time.Since(stopped).Round(time.Millisecond), during)
	for range drillBatches / 2 {
		e.PublishCampaign(s, e.NextPhones(drillBatchSize))
	}
	tl := e.Settle(90 * time.Second)
	t.Logf("dispatcher metrics: %s", drillenv.MetricLines(t, "http://"+addr+"/metrics", "parley_delivery_batches_total"))
	report(t, "NATS restart", tl, drilltally.Expect{})
}

// TestDrillPostgresOutage stops a private PostgreSQL cluster mid-run
// (immediate shutdown: connections cut, no checkpoint) for 5 s and starts
// it again. Outcomes of the sends in flight wait in the recorder and are
// written once it is back; nothing is lost and nothing sent twice.
func TestDrillPostgresOutage(t *testing.T) {
	pg := drillenv.StartPrivatePG(t)
	e := drillenv.New(t, drillenv.Options{PGURL: pg.URL, SimEnv: []string{"PARLEY_PROVIDER_SIM_LATENCY=20ms"}})
	s := e.NewSender("pg", drillRate)
	d, addr := e.StartCampaign()
	accepted := publishLoad(e, s)
	e.WaitReceived(int64(accepted/5), 60*time.Second)
	before := e.SimStats().Accepted
	pg.Stop()
	stopped := time.Now()
	time.Sleep(5 * time.Second)
	during := e.SimStats().Accepted - before
	pg.Start()
	t.Logf("PostgreSQL down %s; the provider received %d sends meanwhile (in flight at the stop)",
		time.Since(stopped).Round(time.Millisecond), during)
	select {
	case <-d.Exited():
		t.Fatalf("the dispatcher died with the database: %v", d.Err())
	default:
	}
	tl := e.Settle(90 * time.Second)
	t.Logf("dispatcher metrics after the outage: %s", drillenv.MetricLines(t, "http://"+addr+"/metrics",
		"parley_delivery_record_flush_failures_total", "parley_delivery_batches_total", "parley_delivery_lease_reclaims_total"))
	report(t, "PostgreSQL outage", tl, drilltally.Expect{})
}
