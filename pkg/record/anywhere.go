package record

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// InStream finds a batch that waits in the SENDS stream, accepted but not
// recorded yet: a *Stream, or a caller's wrapper of one (the gateway's
// answers 503 when the stream cannot be read). ErrNotFound when it is not
// there.
type InStream interface {
	Batch(ctx context.Context, companyID int64, batchID string) (Batch, error)
}

// A batch moves from the stream to the record: a dispatcher commits its
// record before it acks the stream's copy. So FindBatch, CancelBatch and
// BatchMessages look in the record, then in the stream, then in the
// record again, and a batch accepted and moving is always found, whatever
// the moment: the gateway's GET, cancel and message list, and parleyctl's,
// all go through them.

// FindBatch returns the company's batch from the record (counted by
// state), or from the stream (pending: status accepted, ids without
// names); ErrNotFound when neither has it.
func FindBatch(ctx context.Context, db DB, w InStream, companyID int64, batchID string) (b Batch, pending bool, err error) {
	b, err = BatchStatus(ctx, db, companyID, batchID)
	if !errors.Is(err, ErrNotFound) {
		return b, false, err
	}
	b, err = w.Batch(ctx, companyID, batchID)
	if !errors.Is(err, ErrNotFound) {
		return b, err == nil, err
	}
	b, err = BatchStatus(ctx, db, companyID, batchID)
	return b, false, err
}

// CancelBatch cancels the company's batch where FindBatch finds it: a
// recorded one (CancelAt), or one waiting in the stream (CancelPending);
// ErrNotFound when neither has it.
func CancelBatch(ctx context.Context, db *pgxpool.Pool, w InStream, companyID int64, batchID string, now time.Time) (CancelResult, error) {
	res, err := CancelAt(ctx, db, companyID, batchID, now)
	if !errors.Is(err, ErrNotFound) {
		return res, err
	}
	p, err := w.Batch(ctx, companyID, batchID)
	switch {
	case err == nil:
		return CancelPending(ctx, db, p, now)
	case !errors.Is(err, ErrNotFound):
		return CancelResult{}, err
	}
	return CancelAt(ctx, db, companyID, batchID, now)
}

// BatchMessages lists a page of the company's batch's messages (Messages);
// a batch still in the stream has none yet (an empty page). ErrNotFound
// when neither has it.
func BatchMessages(ctx context.Context, db *pgxpool.Pool, w InStream, companyID int64, batchID string, f Filter) (Page, error) {
	page, err := Messages(ctx, db, companyID, batchID, f)
	if !errors.Is(err, ErrNotFound) {
		return page, err
	}
	if _, err := w.Batch(ctx, companyID, batchID); !errors.Is(err, ErrNotFound) {
		if err != nil {
			return Page{}, err
		}
		return Page{BatchID: batchID, Messages: []Message{}}, nil
	}
	return Messages(ctx, db, companyID, batchID, f)
}
