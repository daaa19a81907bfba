//go:build drill

package webhooksender

// Webhook drills, counted at the test receiver against every event the
// outbox ever got (drill_events): each breaks one part during a campaign
// and fails on any event not received, on duplicates beyond what was in
// flight, or on another company's latency.

import (
	"testing"
	"time"
)

// The receiver is down (connections refused) for 60 s during a campaign,
// then back: every event arrives, retried with backoff.
func TestDrillReceiverDown(t *testing.T) {
	e := newEnv(t)
	e.startDispatcher()
	e.startSender("PARLEY_WEBHOOK_SENDER_BACKOFF_BASE=1s", "PARLEY_WEBHOOK_SENDER_BACKOFF_CAP=10s")
	c := e.newCompanyAt("down", 500) // 40,000 messages at 500/s: 80 s, across the outage
	const n = 40_000
	e.campaign(c, n)
	deadline := time.Now().Add(time.Minute)
	for e.recv.Stats(c.name).Unique < 1000 {
		if time.Now().After(deadline) {
			t.Fatal("no deliveries before the outage")
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.rl.down()
	downAt := time.Now()
	t.Logf("receiver down after %d events", e.recv.Stats(c.name).Unique)
	time.Sleep(60 * time.Second)
	e.rl.up(t)
	t.Logf("receiver back after %s; %d events in the outbox so far", time.Since(downAt).Round(time.Second),
		e.Count(`SELECT count(*) FROM drill_events WHERE company_id = $1`, c.Company.ID))
	tl := e.waitAll(c, n, 5*time.Minute)
	t.Logf("receiver down 60 s: events %d, received %d, lost %d, duplicates %d; all in %s after it came back",
		tl.events, tl.received, tl.lost, tl.duplicates, time.Since(downAt.Add(60*time.Second)).Round(time.Second))
	if tl.lost != 0 {
		t.Fatalf("%d events lost", tl.lost)
	}
}

// The sender is SIGKILLed mid-stream and started again: every event
// arrives; the only duplicates are deliveries the receiver had accepted
// whose outcome the dead sender had not recorded.
func TestDrillSenderKill(t *testing.T) {
	e := newEnv(t)
	e.startDispatcher()
	senderEnv := []string{"PARLEY_WEBHOOK_SENDER_LEASE=10s"}
	p, _ := e.startSender(senderEnv...)
	c := e.newCompanyAt("kill", 2000) // 20,000 messages at 2,000/s: 10 s
	const n = 20_000
	e.campaign(c, n)
	deadline := time.Now().Add(time.Minute)
	for e.recv.Stats(c.name).Unique < 5000 {
		if time.Now().After(deadline) {
			t.Fatal("no deliveries before the kill")
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.Kill()
	<-p.Exited()
	time.Sleep(200 * time.Millisecond) // requests on the wire land
	accepted := e.recv.Counts(c.name)
	var held, inFlight int
	rows, err := e.Pool.Query(e.Ctx, `SELECT event_id::text FROM webhook_deliveries WHERE company_id = $1 AND status = 'pending'`, c.Company.ID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		held++
		if accepted[id] > 0 {
			inFlight++
		}
	}
	rows.Close()
	t.Logf("killed after %d events received; %d deliveries pending, of which %d accepted by the receiver but not recorded (in flight)",
		len(accepted), held, inFlight)
	e.startSender(senderEnv...)
	tl := e.waitAll(c, n, 5*time.Minute)
	t.Logf("sender SIGKILL: events %d, received %d, lost %d, duplicates %d (in flight at the kill %d)",
		tl.events, tl.received, tl.lost, tl.duplicates, inFlight)
	if tl.lost != 0 {
		t.Fatalf("%d events lost", tl.lost)
	}
	if tl.duplicates > inFlight {
		t.Fatalf("%d duplicates, more than the %d deliveries in flight at the kill", tl.duplicates, inFlight)
	}
}

// One company's endpoint hangs (every request held until the sender's
// 10 s timeout, its queue full) while another company's receives, both
// campaigns running at once: the second's p99 from change to receipt stays
// under 1 s.
func TestDrillHangingEndpoint(t *testing.T) {
	e := newEnv(t)
	e.startDispatcher()
	e.startSender()
	// Each company's campaign at 1,000 messages a second: the point is the
	// isolation, not the machine's ceiling (make bench-events).
	hang := e.newCompanyAt("hang", 1000)
	e.recv.SetMode(hang.name, "hang", 0)
	ok := e.newCompanyAt("ok", 1000)
	const n = 5000
	e.campaign(hang, n)
	e.campaign(ok, n)
	tl := e.waitAll(ok, n, 3*time.Minute)
	st := e.recv.Stats(ok.name)
	hs := e.recv.Stats(hang.name)
	t.Logf("hanging endpoint (%d requests held, %d accepted); the other company's: events %d, received %d, lost %d, "+
		"change -> receipt p50 %.1f ms, p99 %.1f ms, max %.1f ms",
		hs.Requests, hs.Accepted, tl.events, tl.received, tl.lost, st.P50MS, st.P99MS, st.MaxMS)
	if tl.lost != 0 {
		t.Fatalf("%d events lost", tl.lost)
	}
	if st.P99MS >= 1000 {
		t.Fatalf("the other company's p99 is %.1f ms, want under 1 s", st.P99MS)
	}
}
