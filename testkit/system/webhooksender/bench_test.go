//go:build bench

package webhooksender

// make bench-events: a 20,000-message campaign at full speed with one
// endpoint, through one webhook sender, counted at the test receiver.
//
//   - Backlog: the campaign's events wait in the outbox (the sender is not
//     running); then the sender starts and moves them all: events per
//     second from the first receipt to the last (target >= 5,000/s).
//   - Live: another 20,000-message campaign with the sender running: p50
//     and p99 from each event's change (its occurred_at, the body's
//     timestamp) to its first receipt (target p99 < 1 s).
//
// Both fail on any event of the outbox not received at least once.

import (
	"testing"
	"time"

	"github.com/parleyhq/parley/testkit/drillenv"
)

const benchMessages = 20_000

func TestBenchEvents(t *testing.T) {
	e := newEnv(t)
	e.startDispatcher()

	backlog := e.newCompany("backlog")
	e.campaign(backlog, benchMessages)
	deadline := time.Now().Add(3 * time.Minute)
	for e.Count(`SELECT count(*) FROM event_outbox WHERE company_id = $1`, backlog.Company.ID) < benchMessages+1 {
		if time.Now().After(deadline) {
			t.Fatalf("the campaign's events did not reach the outbox within 3m")
		}
		time.Sleep(100 * time.Millisecond)
	}
	start := time.Now()
	pg0 := drillenv.PostgresCPUSeconds()
	sp, _ := e.startSender()
	tl := e.waitAll(backlog, benchMessages, 5*time.Minute)
	senderCPU, pgCPU := drillenv.CPUSeconds(sp.Pid()), drillenv.PostgresCPUSeconds()-pg0
	st := e.recv.Stats(backlog.name)
	span := st.Last.Sub(st.First)
	rate := float64(tl.received) / span.Seconds()
	t.Logf("backlog: %d events, received %d (lost %d, duplicates %d), first receipt %s after the sender started, "+
		"all in %s: %.0f events/s through one sender",
		tl.events, tl.received, tl.lost, tl.duplicates, st.First.Sub(start).Round(time.Millisecond), span.Round(time.Millisecond), rate)
	t.Logf("backlog CPU per event: sender %.0f µs, PostgreSQL (every backend on the machine) %.0f µs",
		senderCPU/float64(tl.received)*1e6, pgCPU/float64(tl.received)*1e6)

	live := e.newCompany("live")
	stop := e.sample(live)
	e.campaign(live, benchMessages)
	tl2 := e.waitAll(live, benchMessages, 5*time.Minute)
	stop()
	st2 := e.recv.Stats(live.name)
	span2 := st2.Last.Sub(st2.First)
	t.Logf("live: %d events, received %d (lost %d, duplicates %d) in %s (%.0f events/s, the campaign's pace); "+
		"change -> receipt p50 %.1f ms, p99 %.1f ms, max %.1f ms",
		tl2.events, tl2.received, tl2.lost, tl2.duplicates, span2.Round(time.Millisecond),
		float64(tl2.received)/span2.Seconds(), st2.P50MS, st2.P99MS, st2.MaxMS)

	if tl.lost != 0 || tl2.lost != 0 {
		t.Errorf("lost events: backlog %d, live %d", tl.lost, tl2.lost)
	}
	if rate < 5000 {
		t.Errorf("target missed: %.0f events/s through one sender, want at least 5,000", rate)
	}
	if st2.P99MS >= 1000 {
		t.Errorf("target missed: p99 %.1f ms from change to receipt, want under 1 s", st2.P99MS)
	}
}

// sample logs, every 500 ms, where the live campaign's events are: made
// (drill_events), in the outbox, delivery rows, pending, received.
func (e *env) sample(c company) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-done:
				return
			case <-time.After(500 * time.Millisecond):
			}
			var made, outbox, rows, pending int
			_ = e.Pool.QueryRow(e.Ctx, `SELECT (SELECT count(*) FROM drill_events WHERE company_id = $1),
				(SELECT count(*) FROM event_outbox WHERE company_id = $1),
				(SELECT count(*) FROM webhook_deliveries WHERE company_id = $1),
				(SELECT count(*) FROM webhook_deliveries WHERE company_id = $1 AND status = 'pending')`, c.Company.ID).
				Scan(&made, &outbox, &rows, &pending)
			e.t.Logf("made %6d  outbox %6d  deliveries %6d  pending %6d  received %6d", made, outbox, rows, pending, e.recv.Stats(c.name).Unique)
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

func (e *env) newCompany(slug string) company { return e.newCompanyAt(slug, 1_000_000) }
