package delivery

import (
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
	"github.com/parleyhq/parley/pkg/record"
)

// cancelBatch cancels the fixture company's batch now (record.CancelAt) and
// returns how many messages it cancelled.
func (f *fixture) cancelBatch(id string) int64 {
	f.t.Helper()
	res, err := record.CancelAt(f.ctx, f.pool, f.company.ID, id, f.clock.Now())
	if err != nil {
		f.t.Fatal(err)
	}
	return int64(res.Cancelled)
}

// TestCancelledBatchIsNotRetried: messages of a cancelled batch that were
// with the provider when it was cancelled, and fail with a retryable
// error, are cancelled instead of retried; the batch, of which the
// provider accepted nothing, ends cancelled.
func TestCancelledBatchIsNotRetried(t *testing.T) {
	h := newHarness(t)
	h.clock.Run()
	if err := h.sim.SetFaults(whatsappsim.Faults{ErrorRate: 1}); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.MaxAttempts, cfg.BackoffBase, cfg.BackoffCap = 50, 20*time.Millisecond, 50*time.Millisecond
	h.start(record.LaneCampaign, cfg)
	b := h.campaignBatch(phones(5), false, nil)
	h.publish(b, "")
	eventually(t, 10*time.Second, "every message tried at least twice", func() bool {
		var least int
		if err := h.pool.QueryRow(h.ctx, `SELECT COALESCE(min(attempts), 0) FROM messages WHERE batch_id = $1`, b.BatchId).Scan(&least); err != nil {
			t.Fatal(err)
		}
		return least >= 2
	})
	h.cancelBatch(b.BatchId)
	got := h.waitBatch(b.BatchId, record.BatchCancelled, 10*time.Second)
	if got.Counts[record.StateCancelled] != 5 || got.CompletedAt == nil {
		t.Fatalf("after the cancel: %+v", got)
	}
	before := h.sim.Stats().Requests
	time.Sleep(300 * time.Millisecond)
	if after := h.sim.Stats().Requests; after != before {
		t.Fatalf("the provider got %d more requests after the batch was cancelled", after-before)
	}
}
