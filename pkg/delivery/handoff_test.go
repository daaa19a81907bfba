package delivery

import (
	"context"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/contacts"
	"github.com/parleyhq/parley/pkg/record"
)

// claimedAtCreation says, for each message of a batch in seq order,
// whether its expansion claimed it (a hand-off: claimed_at is the
// expansion's time, which is also the not_before of a batch due at once)
// rather than a lane worker later. (created_at is the batch's accepted_at.)
func (f *fixture) claimedAtCreation(batchID string) []bool {
	f.t.Helper()
	rows, err := f.pool.Query(f.ctx, `SELECT claimed_at IS NOT NULL AND claimed_at = not_before FROM messages
		WHERE batch_id = $1 ORDER BY seq`, batchID)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var out []bool
	for rows.Next() {
		var b bool
		if err := rows.Scan(&b); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func TestFreshBatchIsClaimedAsItIsCreated(t *testing.T) {
	h := newHarness(t)
	h.clock.Run()
	h.start(record.LaneCampaign, testConfig())
	ph := phones(5)
	if _, err := contacts.NewStore(h.pool, h.clock.Now).SetOptedOut(h.ctx, h.company.ID, ph[1], true); err != nil {
		t.Fatal(err)
	}
	b := h.campaignBatch(ph, false, nil)
	h.publish(b, "")
	got := h.waitBatch(b.BatchId, record.BatchCompleted, 10*time.Second)
	if got.Counts[record.StateSent] != 4 || got.Counts[record.StateSkippedOptOut] != 1 {
		t.Fatalf("batch = %+v", got)
	}
	for i, c := range h.claimedAtCreation(b.BatchId) {
		if !c {
			t.Errorf("message %d was not claimed by its expansion", i)
		}
	}
	for i, p := range ph {
		want := int64(1)
		if i == 1 {
			want = 0
		}
		if h.sends(p) != want {
			t.Errorf("%s: %d sends, want %d", p, h.sends(p), want)
		}
	}
	var skipped int
	if err := h.pool.QueryRow(h.ctx, `SELECT count(*) FROM event_outbox WHERE type = 'message.skipped' AND data->>'batch_id' = $1`,
		b.BatchId).Scan(&skipped); err != nil || skipped != 1 {
		t.Fatalf("message.skipped events: %d (%v)", skipped, err)
	}

	// Every message skipped at creation: the batch completes in its
	// expansion.
	all := h.campaignBatch(ph[1:2], false, nil)
	h.publish(all, "")
	if got := h.waitBatch(all.BatchId, record.BatchCompleted, 10*time.Second); got.Counts[record.StateSkippedOptOut] != 1 {
		t.Fatalf("batch = %+v", got)
	}
}

// An account with due messages waiting has them claimed first: a new batch
// is not handed off past them, and a hand-off never takes more than a
// second of the account's throughput.
func TestOlderDueMessagesAreNotOvertaken(t *testing.T) {
	h := newHarness(t)
	acct := h.newAccount(h.company.ID, nil, "UTC", 2)
	h.serve(acct.PhoneNumberID)
	camp, err := h.cat.CreateCampaign(h.ctx, h.company.ID, "Slow", h.tpl.ID, acct.ID)
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Run()
	h.start(record.LaneCampaign, testConfig())
	first := h.campaignBatch(phones(4), false, nil)
	first.CampaignId = camp.ID
	h.publish(first, "")
	eventually(t, 10*time.Second, "the first batch expanded", func() bool { return len(h.messages(first.BatchId)) == 4 })
	second := h.campaignBatch(phones(2), false, nil)
	second.CampaignId = camp.ID
	h.publish(second, "")
	h.waitBatch(first.BatchId, record.BatchCompleted, 20*time.Second)
	h.waitBatch(second.BatchId, record.BatchCompleted, 20*time.Second)
	if got, want := h.claimedAtCreation(first.BatchId), []bool{true, true, false, false}; !equalBools(got, want) {
		t.Errorf("first batch claimed at creation %v, want %v (one second at 2/s)", got, want)
	}
	if got, want := h.claimedAtCreation(second.BatchId), []bool{false, false}; !equalBools(got, want) {
		t.Errorf("second batch claimed at creation %v, want %v (older messages were due)", got, want)
	}
	var lastFirst, firstSecond time.Time
	if err := h.pool.QueryRow(h.ctx, `SELECT (SELECT max(claimed_at) FROM messages WHERE batch_id = $1),
		(SELECT min(claimed_at) FROM messages WHERE batch_id = $2)`, first.BatchId, second.BatchId).Scan(&lastFirst, &firstSecond); err != nil {
		t.Fatal(err)
	}
	if firstSecond.Before(lastFirst) {
		t.Errorf("the second batch was claimed at %s, before the first batch's last message (%s)", firstSecond, lastFirst)
	}
}

func equalBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A claim that waited too long for a send slot is released, not sent: its
// outcome could come after the lease gave the message to another
// dispatcher.
func TestClaimTooOldIsNotSent(t *testing.T) {
	now := time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC)
	e := &engine{cfg: Config{Lease: 60 * time.Second, FlushInterval: 10 * time.Millisecond}, callTimeout: 10 * time.Second,
		now: func() time.Time { return now }}
	// 60 s - 10 s - 10 ms - 500 ms: 49.49 s.
	for _, c := range []struct {
		age  time.Duration
		want bool
	}{{0, true}, {49 * time.Second, true}, {49500 * time.Millisecond, false}, {2 * time.Minute, false}} {
		if got := e.fresh(record.Claimed{ClaimedAt: now.Add(-c.age)}); got != c.want {
			t.Errorf("claim %s old: fresh %v, want %v", c.age, got, c.want)
		}
	}
	// A configuration Validate refuses still releases before the lease.
	e.cfg.Lease = 5 * time.Second
	if e.fresh(record.Claimed{ClaimedAt: now.Add(-3 * time.Second)}) {
		t.Error("a claim older than half a 5 s lease counts as fresh")
	}
}

// gatedThrottle grants every permit at once, after gate is closed.
type gatedThrottle struct{ gate chan struct{} }

func (g gatedThrottle) WaitEach(ctx context.Context, _ string, _, n int, use func(granted int)) (int, error) {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return n, ctx.Err()
	}
	use(n)
	return 0, nil
}

// A batch cancelled while its handed-off messages wait for the lane worker
// has them cancelled, not sent: only the one already taken for sending
// goes out (as only a lane worker's claim would).
func TestCancelStopsHandedOffMessages(t *testing.T) {
	h := newHarness(t)
	h.clock.Run()
	cfg := testConfig()
	cfg.ClaimBatch = 1 // the worker takes one message at a time
	gate := gatedThrottle{gate: make(chan struct{})}
	h.startWith(record.LaneCampaign, cfg, gate)
	// Registered after the dispatcher's stop, so run before it: a test that
	// failed early must not leave the worker waiting for its permit.
	t.Cleanup(func() {
		select {
		case <-gate.gate:
		default:
			close(gate.gate)
		}
	})

	ph := phones(5)
	b := h.campaignBatch(ph, false, nil)
	h.publish(b, "")
	eventually(t, 10*time.Second, "every message claimed at creation", func() bool {
		got := h.claimedAtCreation(b.BatchId)
		return len(got) == 5 && equalBools(got, []bool{true, true, true, true, true})
	})
	// The worker took the first message and waits for its permit.
	time.Sleep(200 * time.Millisecond)
	h.cancelBatch(b.BatchId)
	close(gate.gate)
	got := h.waitBatch(b.BatchId, record.BatchCompleted, 10*time.Second)
	if got.Counts[record.StateSent] != 1 || got.Counts[record.StateCancelled] != 4 {
		t.Fatalf("batch = %+v", got)
	}
	if n := h.sim.Stats().Accepted; n != 1 {
		t.Fatalf("the provider accepted %d sends of the cancelled batch, want 1", n)
	}
}
