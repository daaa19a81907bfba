package delivery

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/record"
)

func newTestEngine(t *testing.T, f *fixture, lane record.Lane) *engine {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	return newEngine(lane, cfg, f.pool, f.cat, nil, nil, 0, f.clock.Now, zap.NewNop(), m)
}

func testConfig() Config {
	return Config{
		Workers: 64, ClaimBatch: 500, Recorders: 2, Lease: 60 * time.Second, MaxAttempts: 3,
		BackoffBase: time.Second, BackoffCap: 10 * time.Second, PollInterval: 50 * time.Millisecond,
		FlushInterval: 5 * time.Millisecond, FlushSize: 500, SweepInterval: time.Second, ExpandWorkers: 2,
		AckWait: 5 * time.Second, CacheTTL: time.Second, ShutdownTimeout: 10 * time.Second, HandoffMax: 10_000,
	}
}

func (f *fixture) state(id int64) (record.State, *int, *string) {
	f.t.Helper()
	var s string
	var code *int
	var title *string
	if err := f.pool.QueryRow(f.ctx, `SELECT state::text, error_code, error_title FROM messages WHERE id = $1`, id).Scan(&s, &code, &title); err != nil {
		f.t.Fatal(err)
	}
	return record.State(s), code, title
}

func TestApplyStatusesNeverMovesBackwards(t *testing.T) {
	f := newFixture(t)
	x := NewExpander(f.pool, f.cat, f.clock.Now)
	b := f.campaignBatch(phones(5), false, nil)
	if _, err := x.Campaign(f.ctx, b); err != nil {
		t.Fatal(err)
	}
	f.exec(`UPDATE messages SET state = 'sent', provider_message_id = 'wamid.' || seq, sent_at = $2 WHERE batch_id = $1`, b.BatchId, f.clock.Now())
	msgs := f.messages(b.BatchId)
	at := f.clock.Now()
	st := func(w, s string, d time.Duration) whatsapp.StatusUpdate {
		return whatsapp.StatusUpdate{MessageID: w, Status: whatsapp.Status(s), Timestamp: at.Add(d)}
	}
	res, err := record.ApplyStatuses(f.ctx, f.pool, []whatsapp.StatusUpdate{
		// 0: read arrives before delivered, in one call.
		st("wamid.0", "read", 2*time.Second), st("wamid.0", "delivered", time.Second),
		// 1: failed with the provider's code.
		{MessageID: "wamid.1", Status: whatsapp.StatusFailed, Timestamp: at,
			Errors: []whatsapp.StatusError{{Code: 131026, Title: "Message undeliverable"}}},
		// 2: delivered.
		st("wamid.2", "delivered", time.Second),
		// 3: a status the dispatcher does not track.
		st("wamid.3", "deleted", time.Second),
		// unknown wamid: kept for later.
		st("wamid.later", "delivered", time.Second),
	}, at)
	if err != nil {
		t.Fatal(err)
	}
	if res.Applied != 3 || res.Backlogged != 1 {
		t.Fatalf("result = %+v", res)
	}
	// Later callbacks that would move backwards change nothing.
	res, err = record.ApplyStatuses(f.ctx, f.pool, []whatsapp.StatusUpdate{
		st("wamid.0", "delivered", 3*time.Second), st("wamid.0", "sent", 0), st("wamid.0", "failed", 0),
		st("wamid.2", "failed", 0), st("wamid.2", "sent", 0),
	}, at)
	if err != nil || res.Applied != 0 || res.Backlogged != 0 {
		t.Fatalf("backwards = %+v, %v", res, err)
	}
	// A delivery after failed wins (the device answered); the error stays as a note.
	if res, err = record.ApplyStatuses(f.ctx, f.pool, []whatsapp.StatusUpdate{st("wamid.1", "delivered", 5*time.Second)}, at); err != nil || res.Applied != 1 {
		t.Fatalf("delivered after failed = %+v, %v", res, err)
	}
	want := []record.State{record.StateRead, record.StateDelivered, record.StateDelivered, record.StateSent, record.StateSent}
	for i, m := range msgs {
		s, code, _ := f.state(m.ID)
		if s != want[i] {
			t.Fatalf("message %d: %s, want %s", i, s, want[i])
		}
		if i == 1 && (code == nil || *code != 131026) {
			t.Fatalf("failed code = %v", code)
		}
	}
	var delivered, read time.Time
	if err := f.pool.QueryRow(f.ctx, `SELECT delivered_at, read_at FROM messages WHERE id = $1`, msgs[0].ID).Scan(&delivered, &read); err != nil {
		t.Fatal(err)
	}
	if !delivered.Equal(at.Add(time.Second)) || !read.Equal(at.Add(2*time.Second)) {
		t.Fatalf("delivered %s read %s", delivered, read)
	}

	// The backlogged status applies once the wamid is recorded (the sweeper
	// catches a recorder that raced the callback); week-old rows go.
	f.exec(`UPDATE messages SET provider_message_id = 'wamid.later' WHERE id = $1`, msgs[4].ID)
	f.exec(`INSERT INTO provider_status_backlog (provider_message_id, status, occurred_at, received_at) VALUES ('wamid.never', 'read', $1, $1)`,
		at.Add(-8*24*time.Hour))
	applied, dropped, err := record.SweepBacklog(f.ctx, f.pool, at)
	if err != nil || applied != 1 || dropped != 1 {
		t.Fatalf("sweep = %d applied, %d dropped, %v", applied, dropped, err)
	}
	if s, _, _ := f.state(msgs[4].ID); s != record.StateDelivered {
		t.Fatalf("backlogged status not applied: %s", s)
	}
	var left int
	if err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM provider_status_backlog`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("backlog left %d, %v", left, err)
	}
}

func TestRecorderAppliesEarlyCallbacksAndCompletesBatches(t *testing.T) {
	f := newFixture(t)
	x := NewExpander(f.pool, f.cat, f.clock.Now)
	b := f.campaignBatch(phones(3), false, nil)
	if _, err := x.Campaign(f.ctx, b); err != nil {
		t.Fatal(err)
	}
	e := newTestEngine(t, f, record.LaneCampaign)
	claimedMsgs, err := e.claim(f.ctx, f.acct.ID, 10, f.clock.Now(), false)
	if err != nil || len(claimedMsgs) != 3 {
		t.Fatalf("claim = %d, %v", len(claimedMsgs), err)
	}
	// The provider calls back before the dispatcher records the send.
	wamid := fmt.Sprintf("wamid.%d", claimedMsgs[0].ID)
	if res, err := record.ApplyStatuses(f.ctx, f.pool, []whatsapp.StatusUpdate{{MessageID: wamid, Status: whatsapp.StatusDelivered, Timestamp: f.clock.Now()}}, f.clock.Now()); err != nil || res.Backlogged != 1 {
		t.Fatalf("early callback = %+v, %v", res, err)
	}
	at := f.clock.Now()
	if err := e.rec.write([]record.Outcome{
		{Kind: record.OutcomeSent, ID: claimedMsgs[0].ID, BatchID: b.BatchId, ClaimedAt: claimedMsgs[0].ClaimedAt, Wamid: wamid, At: at},
		{Kind: record.OutcomeRetry, ID: claimedMsgs[1].ID, BatchID: b.BatchId, ClaimedAt: claimedMsgs[1].ClaimedAt, Code: 130429, Title: "Rate limit hit", NotBefore: at.Add(time.Second), At: at},
		{Kind: record.OutcomeFailed, ID: claimedMsgs[2].ID, BatchID: b.BatchId, ClaimedAt: claimedMsgs[2].ClaimedAt, Code: 131026, Title: "Message undeliverable", At: at},
	}); err != nil {
		t.Fatal(err)
	}
	if s, _, _ := f.state(claimedMsgs[0].ID); s != record.StateDelivered {
		t.Fatalf("early delivered not applied at record: %s", s)
	}
	if s, code, _ := f.state(claimedMsgs[1].ID); s != record.StateQueued || code == nil || *code != 130429 {
		t.Fatalf("retry = %s %v", s, code)
	}
	if s, code, _ := f.state(claimedMsgs[2].ID); s != record.StateFailed || code == nil || *code != 131026 {
		t.Fatalf("failed = %s %v", s, code)
	}
	if got := f.batch(b.BatchId); got.Status != record.BatchProcessing {
		t.Fatalf("batch with a retry pending = %s", got.Status)
	}
	// An outcome for a claim that is no longer current changes nothing.
	if err := e.rec.write([]record.Outcome{{Kind: record.OutcomeSent, ID: claimedMsgs[1].ID, BatchID: b.BatchId,
		ClaimedAt: claimedMsgs[1].ClaimedAt.Add(-time.Second), Wamid: "wamid.stale", At: at}}); err != nil {
		t.Fatal(err)
	}
	if s, _, _ := f.state(claimedMsgs[1].ID); s != record.StateQueued {
		t.Fatalf("stale outcome applied: %s", s)
	}
	f.clock.Advance(2 * time.Second)
	again, err := e.claim(f.ctx, f.acct.ID, 10, f.clock.Now(), false)
	if err != nil || len(again) != 1 || again[0].ID != claimedMsgs[1].ID || again[0].Attempts != 1 {
		t.Fatalf("reclaim = %+v, %v", again, err)
	}
	if err := e.rec.write([]record.Outcome{{Kind: record.OutcomeSent, ID: again[0].ID, BatchID: b.BatchId, ClaimedAt: again[0].ClaimedAt,
		Wamid: "wamid.x", At: f.clock.Now()}}); err != nil {
		t.Fatal(err)
	}
	got := f.batch(b.BatchId)
	if got.Status != record.BatchCompleted || got.CompletedAt == nil || got.Counts[record.StateSent] != 1 || got.Counts[record.StateDelivered] != 1 || got.Counts[record.StateFailed] != 1 {
		t.Fatalf("batch = %+v", got)
	}
}
