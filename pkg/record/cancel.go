package record

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/pkg/events"
)

// CancelResult is what a cancel did: how many messages it cancelled (0 when there
// was nothing left to cancel, as on a second cancel) and the batch after it.
type CancelResult struct {
	Cancelled int
	Batch
}

// attempts bounds the retries of a cancel chosen as a deadlock victim
// (a recorder may lock a message, then the batch, in the other order).
const attempts = 5

// Cancel cancels the company's batch now; see CancelAt.
//
// A cancel moves every queued, scheduled and deferred message of the batch
// to cancelled in one transaction that holds the batch's row lock and
// updates only rows still in those states, so no message is both cancelled
// and sent (see the package documentation). A batch none of whose messages
// the provider accepted ends cancelled; one cancelled after some were sent
// ends completed, with a cancelled count.
func Cancel(ctx context.Context, db *pgxpool.Pool, companyID int64, batchID string) (CancelResult, error) {
	return CancelAt(ctx, db, companyID, batchID, time.Now())
}

// CancelAt cancels every message of the company's recorded batch that was
// not handed to the provider yet, recording now as the time. ErrNotFound
// when the company has no such recorded batch (it may still wait in the
// stream: see CancelPending).
func CancelAt(ctx context.Context, db *pgxpool.Pool, companyID int64, batchID string, now time.Time) (CancelResult, error) {
	id, err := uuid.Parse(batchID)
	if err != nil {
		return CancelResult{}, fmt.Errorf("batch %q: %w", batchID, ErrNotFound)
	}
	return retry(ctx, db, func(tx pgx.Tx) (CancelResult, error) {
		return cancelRecorded(ctx, tx, companyID, id.String(), now)
	})
}

// CancelPending cancels a batch found in the stream before any dispatcher
// recorded it (pending as the stream describes it: id, company, kind,
// source, contact count, accepted and scheduled times). It records the batch
// as cancelled, so that its expansion creates its messages cancelled, and
// counts all its contacts as cancelled. When a dispatcher recorded the batch
// meanwhile, it is cancelled as a recorded one.
func CancelPending(ctx context.Context, db *pgxpool.Pool, pending Batch, now time.Time) (CancelResult, error) {
	id, err := uuid.Parse(pending.ID)
	if err != nil || pending.CompanyID <= 0 {
		return CancelResult{}, fmt.Errorf("batch %q: %w", pending.ID, ErrNotFound)
	}
	return retry(ctx, db, func(tx pgx.Tx) (CancelResult, error) {
		tag, err := tx.Exec(ctx, `
			INSERT INTO batches (id, company_id, kind, source, contact_count, is_forced, scheduled_at, status,
				accepted_at, created_at, cancelled_at, completed_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, 'cancelled', $8, $9, $9, $9)
			ON CONFLICT (id) DO NOTHING`,
			id, pending.CompanyID, pending.Kind, pending.Source, pending.ContactCount, pending.IsForced,
			pending.ScheduledAt, pending.AcceptedAt, now)
		if err != nil {
			return CancelResult{}, fmt.Errorf("record cancelled batch %s: %w", id, err)
		}
		if tag.RowsAffected() == 0 {
			return cancelRecorded(ctx, tx, pending.CompanyID, id.String(), now)
		}
		b, err := BatchStatus(ctx, tx, pending.CompanyID, id.String())
		if err != nil {
			return CancelResult{}, err
		}
		if err := appendCancelled(ctx, tx, b, now); err != nil {
			return CancelResult{}, err
		}
		return CancelResult{Cancelled: pending.ContactCount, Batch: b}, nil
	})
}

// cancelRecorded is the cancel of a recorded batch, in tx.
func cancelRecorded(ctx context.Context, tx pgx.Tx, companyID int64, id string, now time.Time) (CancelResult, error) {
	var status string
	var cancelledAt *time.Time
	err := tx.QueryRow(ctx, `SELECT status::text, cancelled_at FROM batches WHERE id = $1 AND company_id = $2 FOR UPDATE`,
		id, companyID).Scan(&status, &cancelledAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return CancelResult{}, fmt.Errorf("batch %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return CancelResult{}, fmt.Errorf("lock batch %s: %w", id, err)
	}
	tag, err := tx.Exec(ctx, `
		UPDATE messages SET state = 'cancelled', cancelled_at = $2, updated_at = $2
		WHERE batch_id = $1 AND state IN ('queued', 'scheduled', 'deferred', 'held')`, id, now)
	if err != nil {
		return CancelResult{}, fmt.Errorf("cancel messages of batch %s: %w", id, err)
	}
	n := int(tag.RowsAffected())
	if n > 0 {
		if err := countCancelled(ctx, tx, id, n, now); err != nil {
			return CancelResult{}, err
		}
	}
	// A batch that can still send is marked, so that what comes back to its
	// queue is cancelled too; a finished one (completed, failed) only is
	// when this cancel found something, which it cannot.
	first := cancelledAt == nil && (n > 0 || status == string(BatchScheduled) || status == string(BatchProcessing))
	if first {
		if _, err := tx.Exec(ctx, `UPDATE batches SET cancelled_at = $2 WHERE id = $1`, id, now); err != nil {
			return CancelResult{}, fmt.Errorf("mark batch %s cancelled: %w", id, err)
		}
		if err := CompleteBatches(ctx, tx, []string{id}, now); err != nil {
			return CancelResult{}, err
		}
	}
	b, err := BatchStatus(ctx, tx, companyID, id)
	if err != nil {
		return CancelResult{}, err
	}
	if first {
		if err := appendCancelled(ctx, tx, b, now); err != nil {
			return CancelResult{}, err
		}
	}
	return CancelResult{Cancelled: n, Batch: b}, nil
}

// appendCancelled records the batch.cancelled event of the first cancel.
func appendCancelled(ctx context.Context, tx pgx.Tx, b Batch, now time.Time) error {
	counts := make(map[string]int, len(b.Counts))
	for s, n := range b.Counts {
		counts[string(s)] = n
	}
	return events.Append(ctx, tx, events.Event{CompanyID: b.CompanyID, Type: events.BatchCancelled, At: now,
		Data: events.Batch{BatchID: b.ID, Kind: string(b.Kind), Status: string(b.Status), Counts: counts, ChangedAt: now}})
}

// retry runs fn in a transaction, again when PostgreSQL chose it as a
// deadlock victim or refused it for serialization.
func retry(ctx context.Context, db *pgxpool.Pool, fn func(pgx.Tx) (CancelResult, error)) (CancelResult, error) {
	var res CancelResult
	var err error
	for i := 0; i < attempts; i++ {
		err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			var e error
			res, e = fn(tx)
			return e
		})
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || (pgErr.Code != "40P01" && pgErr.Code != "40001") {
			return res, err
		}
	}
	return CancelResult{}, err
}
