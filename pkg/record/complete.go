package record

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
)

// cancelQueuedSQL cancels the messages of cancelled batches that are back
// in the queue (a retry, a released or stale claim) or were never sent:
// under the batches' row locks, in the transaction that put them there, so
// that no dispatcher claims them in between.
const cancelQueuedSQL = `
UPDATE messages m SET state = 'cancelled', cancelled_at = $2, updated_at = $2
FROM batches b
WHERE b.id = ANY($1::uuid[]) AND b.cancelled_at IS NOT NULL AND m.batch_id = b.id
  AND m.state IN ('queued', 'scheduled', 'deferred', 'held')
RETURNING m.batch_id::text`

// completeSQL moves touched batches to completed when none of their
// messages can still change, else to processing (a scheduled batch whose
// first message went out). A cancelled batch none of whose messages the
// provider accepted (sent_at) is cancelled instead of completed. The caller
// holds the batches' row locks, so two recorders finishing one batch's last
// messages cannot both miss it.
const completeSQL = `
UPDATE batches b SET
	status = (CASE WHEN x.open THEN 'processing'
		WHEN b.cancelled_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.batch_id = b.id AND m.sent_at IS NOT NULL)
		THEN 'cancelled' ELSE 'completed' END)::batch_status,
	completed_at = CASE WHEN x.open THEN NULL ELSE COALESCE(b.completed_at, $2::timestamptz) END
FROM (SELECT id, bb.status AS old, EXISTS (SELECT 1 FROM messages m WHERE m.batch_id = bb.id
		AND m.state IN ('queued', 'scheduled', 'deferred', 'sending', 'held')) AS open
	FROM batches bb WHERE bb.id = ANY($1::uuid[])) x
WHERE b.id = x.id AND b.status IN ('scheduled', 'processing', 'cancelled')
RETURNING b.id::text, b.company_id, b.kind::text, b.status::text, x.old::text`

// CompleteBatches locks the batches (in id order, so that concurrent
// recorders never deadlock), cancels what came back to the queue of the
// cancelled ones, and updates their status. Call it in the transaction that
// changed their messages.
func CompleteBatches(ctx context.Context, tx pgx.Tx, batches []string, now time.Time) error {
	if len(batches) == 0 {
		return nil
	}
	sort.Strings(batches)
	rows, err := tx.Query(ctx, `SELECT cancelled_at IS NOT NULL FROM batches WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE`, batches)
	if err != nil {
		return fmt.Errorf("lock batches: %w", err)
	}
	flags, err := pgx.CollectRows(rows, pgx.RowTo[bool])
	if err != nil {
		return fmt.Errorf("lock batches: %w", err)
	}
	if slices.Contains(flags, true) {
		rows, err := tx.Query(ctx, cancelQueuedSQL, batches, now)
		if err != nil {
			return fmt.Errorf("cancel requeued messages: %w", err)
		}
		cancelled, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("cancel requeued messages: %w", err)
		}
		if err := countCancelledEach(ctx, tx, cancelled, now); err != nil {
			return err
		}
	}
	rows, err = tx.Query(ctx, completeSQL, batches, now)
	if err != nil {
		return fmt.Errorf("complete batches: %w", err)
	}
	var done []finishedBatch
	for rows.Next() {
		b := finishedBatch{at: now}
		var status, old string
		if err := rows.Scan(&b.id, &b.companyID, &b.kind, &status, &old); err != nil {
			rows.Close()
			return fmt.Errorf("complete batches: %w", err)
		}
		// An event for a batch that reaches completed (a cancelled batch
		// none of whose messages went out stays cancelled: its
		// batch.cancelled came with the cancel).
		if b.status = BatchState(status); b.status == BatchCompleted && old != status {
			done = append(done, b)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("complete batches: %w", err)
	}
	return emitBatches(ctx, tx, done)
}
