package record

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/pkg/bus"
)

// Found is one message looked up by its id or its wamid, with its batch.
type Found struct {
	Message
	BatchID string        `json:"batch_id"`
	Kind    bus.BatchKind `json:"kind"`
	Lane    Lane          `json:"lane"`
}

// messageSelect reads a message as Messages lists it, with its batch.
const messageSelect = `
	SELECT m.id, m.seq, m.phone, m.state::text, m.provider_message_id, m.error_code, m.error_title, m.attempts,
		CASE WHEN m.state IN ('queued', 'scheduled', 'deferred') THEN m.not_before END,
		m.created_at, m.deferred_at, CASE WHEN m.state <> 'skipped_opt_out' THEN m.claimed_at END, m.sent_at,
		m.delivered_at, m.read_at, m.failed_at, m.skipped_at, m.cancelled_at, m.updated_at`

// scanMessage scans messageSelect's columns, then extra.
func scanMessage(row pgx.Row, extra ...any) (Message, error) {
	var m Message
	var state string
	err := row.Scan(append([]any{&m.ID, &m.Seq, &m.Phone, &state, &m.ProviderMessageID, &m.ErrorCode, &m.ErrorTitle, &m.Attempts,
		&m.Due, &m.Times.Created, &m.Times.Deferred, &m.Times.Sending, &m.Times.Sent, &m.Times.Delivered,
		&m.Times.Read, &m.Times.Failed, &m.Times.SkippedOptOut, &m.Times.Cancelled, &m.Times.Updated}, extra...)...)
	m.State = State(state)
	return m, err
}

// MessageByID finds the company's message by its id; another company's, or
// none, is ErrNotFound.
func MessageByID(ctx context.Context, db DB, companyID, id int64) (Found, error) {
	return findMessage(ctx, db, `m.id = $1 AND m.company_id = $2`, id, companyID)
}

// MessageByWamid finds the company's message by the id WhatsApp gave it
// when it accepted it (the wamid status callbacks carry); another
// company's, or none, is ErrNotFound.
func MessageByWamid(ctx context.Context, db DB, companyID int64, wamid string) (Found, error) {
	return findMessage(ctx, db, `m.provider_message_id = $1 AND m.company_id = $2`, wamid, companyID)
}

func findMessage(ctx context.Context, db DB, where string, key any, companyID int64) (Found, error) {
	var f Found
	var lane string
	m, err := scanMessage(db.QueryRow(ctx, messageSelect+`, m.batch_id::text, b.kind::text, m.lane::text
		FROM messages m JOIN batches b ON b.id = m.batch_id
		WHERE `+where, key, companyID), &f.BatchID, &f.Kind, &lane)
	if errors.Is(err, pgx.ErrNoRows) {
		return Found{}, fmt.Errorf("message %v: %w", key, ErrNotFound)
	}
	if err != nil {
		return Found{}, fmt.Errorf("find message %v: %w", key, err)
	}
	f.Message, f.Lane = m, Lane(lane)
	return f, nil
}
