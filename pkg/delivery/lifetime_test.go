package delivery

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/pkg/store"
)

// TestRetentionDropsOnlyClosedWeeksWhileSending: the record's retention
// (record.KeepRecord) runs while two campaign dispatchers send. A week past
// the retention that still holds messages waiting to be sent (a batch
// accepted 60 days ago, scheduled for later) is kept, and its messages go
// out when their time comes; once they are sent, the next run drops the
// week. The batches of this week, sending all along, lose nothing and send
// nothing twice (counted per recipient at the simulator), and their
// messages stay in the record.
func TestRetentionDropsOnlyClosedWeeksWhileSending(t *testing.T) {
	h := newHarness(t)
	h.clock.Set(time.Now())
	h.clock.Run()
	cfg := testConfig()
	h.start(record.LaneCampaign, cfg)
	h.start(record.LaneCampaign, cfg)
	const retention = 30 * 24 * time.Hour
	// A record partitioned for months: weeks from 60 days ago (the
	// migration's messages_legacy, empty here, covers them until then).
	h.exec(`DROP TABLE messages_legacy`)
	if _, err := store.CreateWeeks(h.ctx, h.pool, "messages", h.clock.Now().Add(-60*24*time.Hour), 10); err != nil {
		t.Fatal(err)
	}

	// A batch accepted 60 days ago (a long backlog), scheduled an hour
	// ahead: its week is past the retention, its messages still to send.
	oldPhones := phones(300)
	old := h.campaignBatch(oldPhones, false, nil)
	old.AcceptedAt = timestamppb.New(h.clock.Now().Add(-60 * 24 * time.Hour))
	at := h.clock.Now().Add(time.Hour)
	old.ScheduledAt = timestamppb.New(at)
	h.publish(old, "")
	h.waitBatch(old.BatchId, record.BatchScheduled, 10*time.Second)
	week := func(id string) string {
		var p string
		if err := h.pool.QueryRow(h.ctx, `SELECT DISTINCT tableoid::regclass::text FROM messages WHERE batch_id = $1`, id).Scan(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	oldWeek := week(old.BatchId)

	// This week's batches are sent while the retention runs.
	var current []string
	var currentPhones [][]string
	send := func() {
		ph := phones(1000)
		b := h.campaignBatch(ph, false, nil)
		h.publish(b, "")
		current, currentPhones = append(current, b.BatchId), append(currentPhones, ph)
	}
	send()
	k, err := record.KeepRecord(h.ctx, h.pool, h.clock.Now(), retention)
	if err != nil {
		t.Fatal(err)
	}
	// (The empty weeks around it go.)
	if slices.Contains(k.Dropped, oldWeek) || !slices.Equal(k.Open, []string{oldWeek}) {
		t.Fatalf("with its messages scheduled: dropped %v, kept open %v; want %s kept open", k.Dropped, k.Open, oldWeek)
	}
	if n := len(h.messages(old.BatchId)); n != len(oldPhones) {
		t.Fatalf("the old batch has %d messages after the retention ran, want %d", n, len(oldPhones))
	}

	// Its time comes: its messages go out, and then its week.
	h.clock.Set(at)
	h.waitBatch(old.BatchId, record.BatchCompleted, 30*time.Second)
	send()
	k, err = record.KeepRecord(h.ctx, h.pool, h.clock.Now(), retention)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(k.Dropped, oldWeek) || len(k.Open) != 0 {
		t.Fatalf("once sent: dropped %v, kept open %v; want %s dropped", k.Dropped, k.Open, oldWeek)
	}
	if n := len(h.messages(old.BatchId)); n != 0 {
		t.Fatalf("the old batch still has %d messages after its week was dropped", n)
	}
	for _, p := range oldPhones {
		if n := h.sends(p); n != 1 {
			t.Fatalf("old batch: %s got %d sends, want 1", p, n)
		}
	}

	for i, id := range current {
		h.waitBatch(id, record.BatchCompleted, 30*time.Second)
		msgs := h.messages(id)
		if len(msgs) != len(currentPhones[i]) {
			t.Fatalf("batch %d of this week: %d messages in the record, want %d", i, len(msgs), len(currentPhones[i]))
		}
		for _, m := range msgs {
			if m.State != record.StateSent {
				t.Fatalf("batch %d of this week: message to %s is %s, want sent", i, m.Phone, m.State)
			}
		}
		for _, p := range currentPhones[i] {
			if n := h.sends(p); n != 1 {
				t.Fatalf("batch %d of this week: %s got %d sends, want 1", i, p, n)
			}
		}
		if w := week(id); w == oldWeek || w == "messages_default" {
			t.Fatalf("batch %d of this week is in partition %s", i, w)
		}
	}
}
