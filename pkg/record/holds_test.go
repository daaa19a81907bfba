package record_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/events"
	"github.com/parleyhq/parley/pkg/record"
)

func (f *fixture) templateChange(status, source string, at time.Time) record.TemplateApplied {
	f.t.Helper()
	res, err := record.ApplyTemplateChange(f.ctx, f.pool, record.TemplateChange{CompanyID: f.comp.ID,
		TemplateID: f.camp.TemplateID, Status: status, Reason: "test", Source: source, At: at})
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

// TestTemplatePauseHoldsReleasesAndDisableFails walks a campaign through its
// template's pause, approval, second pause and disabling: waiting messages
// are held (never failed) while it is paused, a claimed message the provider
// refused is held too, they all go again when it is approved, and they fail
// with 132016 once it is disabled. Every move is one record.Moves allows, and
// the counters follow.
func TestTemplatePauseHoldsReleasesAndDisableFails(t *testing.T) {
	f := newFixture(t)
	moves := f.watchMoves()
	b := f.campaignBatch(6, nil)
	f.expand(b)
	claimed, err := record.Claim(f.ctx, f.pool, record.LaneCampaign, f.camp.MessagingAccountID, 2, f.now, false)
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claim: %d, %v", len(claimed), err)
	}

	res := f.templateChange(record.TemplatePaused, record.SourceWebhook, f.now)
	if !res.Changed || res.Held != 4 || res.Previous != record.TemplateApproved || res.Name != "hello" {
		t.Fatalf("pause: %+v, want 4 held from APPROVED", res)
	}
	// One claimed message was refused (132015), the other sent.
	hold := record.Outcome{Kind: record.OutcomeHold, Reason: record.HoldTemplatePaused, ID: claimed[0].ID, BatchID: b.BatchId,
		ClaimedAt: claimed[0].ClaimedAt, At: f.now, TemplateID: f.camp.TemplateID, Code: 132015, Title: "Template is paused"}
	sent := record.Outcome{Kind: record.OutcomeSent, ID: claimed[1].ID, BatchID: b.BatchId, ClaimedAt: claimed[1].ClaimedAt,
		At: f.now, Wamid: "wamid.hold.1"}
	counts, err := record.RecordOutcomes(f.ctx, f.pool, []record.Outcome{hold, sent}, f.now)
	if err != nil || counts[record.OutcomeHold] != 1 || counts[record.OutcomeSent] != 1 {
		t.Fatalf("outcomes: %v, %v", counts, err)
	}
	if got := f.states(b.BatchId); got["held"] != 5 || got["sent"] != 1 {
		t.Fatalf("after the pause: %v, want 5 held and 1 sent", got)
	}
	held, err := record.BatchHeld(f.ctx, f.pool, b.BatchId)
	if err != nil || len(held) != 1 || held[0].Reason != record.HoldTemplatePaused || held[0].Messages != 5 || held[0].TemplateName != "hello" {
		t.Fatalf("held: %+v, %v", held, err)
	}
	if evs := f.outbox(events.BatchHeld); len(evs) != 2 {
		t.Errorf("batch.held events: %d, want 2 (the webhook's pause, the refused send)", len(evs))
	}
	if evs := f.outbox(events.TemplateStatusChanged); len(evs) != 1 {
		t.Errorf("template.status_changed events: %d, want 1", len(evs))
	}

	// A refusal of a send claimed before the template's last change is
	// stale and changes nothing.
	if res := f.templateChange(record.TemplateApproved, record.SourceWebhook, f.now); res.Released != 5 {
		t.Fatalf("approve: %+v, want 5 released", res)
	}
	if res := f.templateChange(record.TemplatePaused, record.SourceSend, f.now.Add(-time.Hour)); res.Changed {
		t.Fatalf("a stale refusal paused the template: %+v", res)
	}
	if got := f.states(b.BatchId); got["queued"] != 5 {
		t.Fatalf("after the approval: %v, want 5 queued", got)
	}
	var rel struct {
		Messages int    `json:"messages"`
		Reason   string `json:"reason"`
	}
	if evs := f.outbox(events.BatchReleased); len(evs) != 1 || json.Unmarshal(evs[0], &rel) != nil || rel.Messages != 5 {
		t.Errorf("batch.released events: %d (%+v), want one of 5 messages", len(evs), rel)
	}

	f.templateChange(record.TemplatePaused, record.SourceWebhook, time.Now())
	res = f.templateChange(record.TemplateDisabled, record.SourceWebhook, time.Now())
	if res.Failed != 5 {
		t.Fatalf("disable: %+v, want 5 failed", res)
	}
	var code int
	var title string
	if err := f.pool.QueryRow(f.ctx, `SELECT error_code, error_title FROM messages WHERE batch_id = $1 AND state = 'failed' LIMIT 1`,
		b.BatchId).Scan(&code, &title); err != nil || code != record.CodeTemplateDisabled {
		t.Fatalf("failed message: %d %q, %v", code, title, err)
	}
	var status string
	var pauses int
	if err := f.pool.QueryRow(f.ctx, `SELECT status, pause_count FROM templates WHERE id = $1`, f.camp.TemplateID).
		Scan(&status, &pauses); err != nil || status != record.TemplateDisabled || pauses != 2 {
		t.Errorf("template: %s after %d pauses, %v; want DISABLED after 2 (disabling a paused template is no new pause)", status, pauses, err)
	}
	var batchStatus string
	if err := f.pool.QueryRow(f.ctx, `SELECT status::text FROM batches WHERE id = $1`, b.BatchId).Scan(&batchStatus); err != nil ||
		batchStatus != string(record.BatchCompleted) {
		t.Errorf("batch: %q, %v; want completed", batchStatus, err)
	}
	var history int
	if err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM template_status_events WHERE template_id = $1`, f.camp.TemplateID).
		Scan(&history); err != nil || history != 4 {
		t.Errorf("history: %d rows, %v; want 4", history, err)
	}
	f.countersMatchRecord()
	checkMoves(t, moves(), "queued -> held", "sending -> held", "held -> queued", "held -> failed")
}

// checkMoves fails on a move record.Moves does not allow, and on a wanted
// move that never happened.
func checkMoves(t *testing.T, seen map[string]int, want ...string) {
	t.Helper()
	for move, n := range seen {
		var from, to record.State
		fmt.Sscanf(move, "%s -> %s", &from, &to)
		if !record.CanMove(from, to) {
			t.Errorf("%d message(s) moved %s, which record.Moves does not allow", n, move)
		}
	}
	for _, w := range want {
		if seen[w] == 0 {
			t.Errorf("no message moved %s; moves seen: %v", w, seen)
		}
	}
}

// TestMessagingLimitHoldIsReleasedWhenRoomComes: a message held for the
// messaging limit waits until its not_before, then the sweep's release
// queues it again; a cancel takes held messages too.
func TestMessagingLimitHoldIsReleasedWhenRoomComes(t *testing.T) {
	f := newFixture(t)
	moves := f.watchMoves()
	b := f.campaignBatch(3, nil)
	f.expand(b)
	claimed, err := record.Claim(f.ctx, f.pool, record.LaneCampaign, f.camp.MessagingAccountID, 3, f.now, false)
	if err != nil || len(claimed) != 3 {
		t.Fatalf("claim: %d, %v", len(claimed), err)
	}
	room := f.now.Add(time.Minute)
	var outs []record.Outcome
	for _, c := range claimed {
		outs = append(outs, record.Outcome{Kind: record.OutcomeHold, Reason: record.HoldMessagingLimit, ID: c.ID, BatchID: c.BatchID,
			ClaimedAt: c.ClaimedAt, NotBefore: room, At: f.now})
	}
	if _, err := record.RecordOutcomes(f.ctx, f.pool, outs, f.now); err != nil {
		t.Fatal(err)
	}
	held, err := record.BatchHeld(f.ctx, f.pool, b.BatchId)
	if err != nil || len(held) != 1 || held[0].Messages != 3 || held[0].Until == nil || !held[0].Until.Equal(room) {
		t.Fatalf("held: %+v, %v; want 3 until %s", held, err, room)
	}
	if n, err := record.ReleaseDueHolds(f.ctx, f.pool, room.Add(-time.Second), time.Hour); err != nil || n != 0 {
		t.Fatalf("release before the room: %d, %v", n, err)
	}
	// An approval of the template does not release messaging limit holds.
	f.templateChange(record.TemplatePaused, record.SourceWebhook, f.now)
	if res := f.templateChange(record.TemplateApproved, record.SourceWebhook, f.now); res.Released != 0 {
		t.Fatalf("a template's approval released %d messaging limit holds", res.Released)
	}
	if n, err := record.ReleaseDueHolds(f.ctx, f.pool, room, time.Hour); err != nil || n != 3 {
		t.Fatalf("release at the room: %d, %v", n, err)
	}
	again, err := record.Claim(f.ctx, f.pool, record.LaneCampaign, f.camp.MessagingAccountID, 3, room, false)
	if err != nil || len(again) != 3 {
		t.Fatalf("claim after the release: %d, %v", len(again), err)
	}
	outs = outs[:0]
	for _, c := range again[:2] {
		outs = append(outs, record.Outcome{Kind: record.OutcomeHold, Reason: record.HoldMessagingLimit, ID: c.ID, BatchID: c.BatchID,
			ClaimedAt: c.ClaimedAt, NotBefore: room.Add(time.Hour), At: room})
	}
	outs = append(outs, record.Outcome{Kind: record.OutcomeSent, ID: again[2].ID, BatchID: b.BatchId, ClaimedAt: again[2].ClaimedAt,
		At: room, Wamid: "wamid.limit.1"})
	if _, err := record.RecordOutcomes(f.ctx, f.pool, outs, room); err != nil {
		t.Fatal(err)
	}
	if _, err := record.CancelAt(f.ctx, f.pool, f.comp.ID, b.BatchId, room.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := f.states(b.BatchId); got["cancelled"] != 2 || got["sent"] != 1 {
		t.Fatalf("after the cancel: %v, want 2 cancelled, 1 sent", got)
	}
	f.countersMatchRecord()
	checkMoves(t, moves(), "sending -> held", "held -> queued", "held -> cancelled")
}

// TestTemplateChangeOfAnotherCompanyIsNotFound: a company cannot change
// another's template.
func TestTemplateChangeOfAnotherCompanyIsNotFound(t *testing.T) {
	f := newFixture(t)
	_, err := record.ApplyTemplateChange(f.ctx, f.pool, record.TemplateChange{CompanyID: f.other.ID, TemplateID: f.camp.TemplateID,
		Status: record.TemplatePaused, Source: record.SourceWebhook})
	if !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	if _, err := record.ApplyTemplateChange(f.ctx, f.pool, record.TemplateChange{CompanyID: f.comp.ID, TemplateID: f.camp.TemplateID,
		Status: "SLEEPING", Source: record.SourceWebhook}); !errors.Is(err, record.ErrTemplateStatus) {
		t.Fatalf("err = %v, want ErrTemplateStatus", err)
	}
}

// TestMarketingLimitIsRetriedOnceThenFails: a first 131049 in a failed
// status holds the message for its retry (no message.failed event, its
// send counted back), the release queues it again, and a second 131049
// after the retry's send fails it with the reason.
func TestMarketingLimitIsRetriedOnceThenFails(t *testing.T) {
	f := newFixture(t)
	moves := f.watchMoves()
	b := f.campaignBatch(1, nil)
	f.expand(b)
	send := func(at time.Time, wamid string) {
		t.Helper()
		c, err := record.Claim(f.ctx, f.pool, record.LaneCampaign, f.camp.MessagingAccountID, 1, at, false)
		if err != nil || len(c) != 1 {
			t.Fatalf("claim: %d, %v", len(c), err)
		}
		if _, err := record.RecordOutcomes(f.ctx, f.pool, []record.Outcome{{Kind: record.OutcomeSent, ID: c[0].ID,
			BatchID: b.BatchId, ClaimedAt: c[0].ClaimedAt, At: at, Wamid: wamid}}, at); err != nil {
			t.Fatal(err)
		}
	}
	refuse := func(at time.Time, wamid string) {
		t.Helper()
		if _, err := record.ApplyStatuses(f.ctx, f.pool, []whatsapp.StatusUpdate{{MessageID: wamid, Status: whatsapp.StatusFailed,
			Timestamp: at, Errors: []whatsapp.StatusError{{Code: 131049, Title: "healthy ecosystem engagement"}}}}, at); err != nil {
			t.Fatal(err)
		}
	}
	send(f.now, "wamid.mkt.1")
	refuse(f.now.Add(time.Second), "wamid.mkt.1")
	if got := f.states(b.BatchId); got["held"] != 1 {
		t.Fatalf("after the first 131049: %v, want held", got)
	}
	if evs := f.outbox(events.MessageFailed); len(evs) != 0 {
		t.Fatalf("a held message wrote message.failed: %s", evs)
	}
	f.countersMatchRecord()
	retry := 24 * time.Hour
	if n, err := record.ReleaseDueHolds(f.ctx, f.pool, f.now.Add(time.Hour), retry); err != nil || n != 0 {
		t.Fatalf("released before its retry: %d, %v", n, err)
	}
	later := f.now.Add(retry + time.Minute)
	if n, err := record.ReleaseDueHolds(f.ctx, f.pool, later, retry); err != nil || n != 1 {
		t.Fatalf("release after the retry delay: %d, %v", n, err)
	}
	send(later, "wamid.mkt.2")
	refuse(later.Add(time.Second), "wamid.mkt.2")
	var state string
	var code int
	if err := f.pool.QueryRow(f.ctx, `SELECT state::text, error_code FROM messages WHERE batch_id = $1`, b.BatchId).
		Scan(&state, &code); err != nil || state != "failed" || code != 131049 {
		t.Fatalf("after the second 131049: %s %d, %v; want failed 131049", state, code, err)
	}
	if evs := f.outbox(events.MessageFailed); len(evs) != 1 {
		t.Fatalf("message.failed events: %d, want 1", len(evs))
	}
	f.countersMatchRecord()
	checkMoves(t, moves(), "sent -> failed", "failed -> held", "held -> queued")
}

// TestTemplateChangeSkipsLockedMessages: a template's pause and disabling
// never wait for a message another transaction holds (a claim, an outcome,
// a cancel under way): they skip it, and the dispatcher meets the new
// status at its claim. Waiting for it could deadlock with a transaction
// that, holding that message, waits for the template.
func TestTemplateChangeSkipsLockedMessages(t *testing.T) {
	f := newFixture(t)
	b := f.campaignBatch(4, nil)
	f.expand(b)
	tx, err := f.pool.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(f.ctx) //nolint:errcheck // ended below
	var locked int64
	if err := tx.QueryRow(f.ctx, `SELECT id FROM messages WHERE batch_id = $1 ORDER BY seq LIMIT 1 FOR UPDATE`,
		b.BatchId).Scan(&locked); err != nil {
		t.Fatal(err)
	}
	change := func(status string) record.TemplateApplied {
		t.Helper()
		ctx, cancel := context.WithTimeout(f.ctx, 5*time.Second)
		defer cancel()
		res, err := record.ApplyTemplateChange(ctx, f.pool, record.TemplateChange{CompanyID: f.comp.ID,
			TemplateID: f.camp.TemplateID, Status: status, Reason: "test", Source: record.SourceWebhook})
		if err != nil {
			t.Fatalf("%s while a message is locked: %v", status, err)
		}
		return res
	}
	if res := change(record.TemplatePaused); res.Held != 3 {
		t.Fatalf("pause: %+v, want the 3 unlocked messages held", res)
	}
	if res := change(record.TemplateDisabled); res.Failed != 3 {
		t.Fatalf("disable: %+v, want the 3 held messages failed", res)
	}
	if err := tx.Rollback(f.ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.states(b.BatchId); got["failed"] != 3 || got["queued"] != 1 {
		t.Fatalf("states %v, want 3 failed and the skipped one still queued (its claim fails it)", got)
	}
}
