package delivery

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
	"github.com/parleyhq/parley/pkg/record"
)

// cancelBatch cancels a batch as pkg/batchctl does (which this package's
// tests cannot import): under the batch's row lock, only the messages not
// handed to the provider, then the batch's status.
func (f *fixture) cancelBatch(id string) int64 {
	f.t.Helper()
	var n int64
	now := f.clock.Now()
	err := pgx.BeginFunc(f.ctx, f.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(f.ctx, `SELECT 1 FROM batches WHERE id = $1 FOR UPDATE`, id); err != nil {
			return err
		}
		tag, err := tx.Exec(f.ctx, `UPDATE messages SET state = 'cancelled', cancelled_at = $2, updated_at = $2
			WHERE batch_id = $1 AND state IN ('queued', 'scheduled', 'deferred')`, id, now)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		if _, err := tx.Exec(f.ctx, `UPDATE batches SET cancelled_at = $2 WHERE id = $1`, id, now); err != nil {
			return err
		}
		return record.CompleteBatches(f.ctx, tx, []string{id}, now)
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return n
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
