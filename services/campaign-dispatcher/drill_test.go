//go:build drill

package main

// Crash drills (make drills): each runs the real dispatcher binary and
// provider-sim with thousands of messages in flight, breaks one part, and
// checks that every accepted contact ends in exactly one terminal state and
// that the provider got at most one send per contact beyond the documented
// duplicate window. They print what they measured.

import (
	"testing"
	"time"
)

const (
	drillBatches   = 10
	drillBatchSize = 1000
	drillRate      = 1000 // the account's throughput, messages per second
)

func report(t *testing.T, name string, tl tally, window int) {
	t.Helper()
	t.Logf("%s: accepted %d contacts, %d messages, %d terminal (%d sent), lost %d, provider received %d for %d recipients, duplicated sends %d (window %d), states %v",
		name, tl.Accepted, tl.Messages, tl.Terminal, tl.Sent, tl.Lost, tl.Received, tl.Recipients, tl.Duplicates, window, tl.States)
	if tl.Lost != 0 {
		t.Errorf("%d accepted contacts have no terminal state", tl.Lost)
	}
	if tl.Messages != tl.Accepted {
		t.Errorf("%d message rows for %d accepted contacts", tl.Messages, tl.Accepted)
	}
	if tl.Duplicates > int64(window) {
		t.Errorf("%d duplicated sends, beyond the window of %d", tl.Duplicates, window)
	}
	if int64(tl.Sent) != int64(tl.Recipients) {
		t.Errorf("%d messages recorded sent but the provider received %d distinct recipients", tl.Sent, tl.Recipients)
	}
}

func publishLoad(e *drillEnv, s sender) int {
	for range drillBatches {
		e.publishCampaign(s, e.nextPhones(drillBatchSize))
	}
	return drillBatches * drillBatchSize
}

// TestDrillDispatcherKill SIGKILLs the dispatcher mid-run and starts it
// again. Rows left in sending are the documented window: the restarted
// dispatcher sends them again once their lease (4 s here) has passed.
func TestDrillDispatcherKill(t *testing.T) {
	e := newDrillEnv(t, drillOptions{simEnv: []string{"PARLEY_PROVIDER_SIM_LATENCY=20ms"}})
	s := e.newSender("kill", drillRate)
	lease := []string{"PARLEY_DISPATCH_LEASE=4s", "PARLEY_DISPATCH_SWEEP_INTERVAL=500ms", "PARLEY_DISPATCH_ACK_WAIT=5s"}
	d, _ := e.startCampaign(lease...)
	accepted := publishLoad(e, s)
	e.waitReceived(int64(accepted/5), 60*time.Second)
	d.Kill()
	// Requests the provider had already taken finish on its side.
	time.Sleep(200 * time.Millisecond)
	sending := e.count(`SELECT count(*) FROM messages WHERE state = 'sending'`)
	open := e.count(`SELECT count(*) FROM messages WHERE state IN ('queued', 'scheduled', 'deferred', 'sending')`)
	expanded := e.count(`SELECT count(*) FROM messages`)
	unrecorded := e.simStats().Accepted - int64(e.count(`SELECT count(*) FROM messages WHERE state IN ('sent', 'delivered', 'read')`))
	t.Logf("at the kill: %d of %d contacts expanded, %d not yet terminal (in flight), %d in sending, %d sends the provider had that were not recorded",
		expanded, accepted, open+accepted-expanded, sending, unrecorded)
	if open+accepted-expanded < 5000 {
		t.Errorf("only %d messages in flight at the kill; the drill wants at least 5000", open+accepted-expanded)
	}
	start := time.Now()
	e.startCampaign(lease...)
	tl := e.waitSettled(accepted, 90*time.Second)
	t.Logf("settled %s after the restart", time.Since(start).Round(time.Millisecond))
	report(t, "dispatcher SIGKILL", tl, sending)
}

// TestDrillNATSRestart stops the NATS server for 3 s right after half the
// batches were published (some are being expanded, their acks in flight)
// and starts it again; batches published before and after are all
// delivered, none twice.
func TestDrillNATSRestart(t *testing.T) {
	e := newDrillEnv(t, drillOptions{simEnv: []string{"PARLEY_PROVIDER_SIM_LATENCY=20ms"}})
	s := e.newSender("nats", drillRate)
	_, addr := e.startCampaign("PARLEY_DISPATCH_ACK_WAIT=5s")
	accepted := 0
	for range drillBatches / 2 {
		e.publishCampaign(s, e.nextPhones(drillBatchSize))
		accepted += drillBatchSize
	}
	e.nats.Stop()
	stopped := time.Now()
	before := e.simStats().Accepted
	time.Sleep(3 * time.Second)
	during := e.simStats().Accepted - before
	e.nats.Start()
	t.Logf("NATS down %s; the provider received %d sends meanwhile (messages already in PostgreSQL keep going)",
		time.Since(stopped).Round(time.Millisecond), during)
	for range drillBatches / 2 {
		e.publishCampaign(s, e.nextPhones(drillBatchSize))
		accepted += drillBatchSize
	}
	tl := e.waitSettled(accepted, 90*time.Second)
	t.Logf("dispatcher metrics: %s", metricLines(t, "http://"+addr+"/metrics", "parley_delivery_batches_total"))
	report(t, "NATS restart", tl, 0)
}

// TestDrillPostgresOutage stops a private PostgreSQL cluster mid-run
// (immediate shutdown: connections cut, no checkpoint) for 5 s and starts
// it again. Outcomes of the sends in flight wait in the recorder and are
// written once it is back; nothing is lost and nothing sent twice.
func TestDrillPostgresOutage(t *testing.T) {
	pg := startPrivatePG(t)
	e := newDrillEnv(t, drillOptions{pgURL: pg.URL, simEnv: []string{"PARLEY_PROVIDER_SIM_LATENCY=20ms"}})
	s := e.newSender("pg", drillRate)
	d, addr := e.startCampaign()
	accepted := publishLoad(e, s)
	e.waitReceived(int64(accepted/5), 60*time.Second)
	before := e.simStats().Accepted
	pg.Stop()
	stopped := time.Now()
	time.Sleep(5 * time.Second)
	during := e.simStats().Accepted - before
	pg.Start()
	t.Logf("PostgreSQL down %s; the provider received %d sends meanwhile (in flight at the stop)",
		time.Since(stopped).Round(time.Millisecond), during)
	select {
	case <-d.Exited():
		t.Fatalf("the dispatcher died with the database: %v", d.Err())
	default:
	}
	tl := e.waitSettled(accepted, 90*time.Second)
	t.Logf("dispatcher metrics after the outage: %s", metricLines(t, "http://"+addr+"/metrics",
		"parley_delivery_record_flush_failures_total", "parley_delivery_batches_total", "parley_delivery_lease_reclaims_total"))
	report(t, "PostgreSQL outage", tl, 0)
}
