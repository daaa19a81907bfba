package record

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/events"
)

// Template statuses at the provider (templates.status): the Cloud API's.
const (
	TemplatePending  = whatsapp.TemplatePending
	TemplateApproved = whatsapp.TemplateApproved
	TemplateRejected = whatsapp.TemplateRejected
	TemplatePaused   = whatsapp.TemplatePaused
	TemplateDisabled = whatsapp.TemplateDisabled
)

// Sources of a template's change (template_status_events.source).
const (
	SourceWebhook  = "webhook"
	SourceSync     = "sync"
	SourceSend     = "send"
	SourceSubmit   = "submit"
	SourceOperator = "operator"
)

// The codes a template's messages fail with: the provider's 132016 for a
// disabled template, Parley's 900006 for a rejected one (the provider
// answers 132001 for a template it does not have approved).
const (
	CodeTemplateDisabled = 132016
	CodeTemplateRejected = 900006
)

// TemplateChange is a template's new status at the provider.
type TemplateChange struct {
	CompanyID  int64
	TemplateID int64
	// Status is PENDING, APPROVED, REJECTED, PAUSED or DISABLED.
	Status string
	// Reason is a rejection's reason or a pause's explanation.
	Reason string
	// PausedUntil is when a PAUSED template is expected back (zero:
	// unknown).
	PausedUntil time.Time
	// Source says where the change comes from (SourceWebhook, ...).
	Source string
	// At is when it happened. For a refused send (SourceSend) it is the
	// template's status_changed_at as the sender read it before the send
	// (TemplateStatus.ChangedAt): a template changed since is a stale
	// refusal (the template came back after the send left), which changes
	// nothing.
	At time.Time
}

// TemplateApplied is what a change did.
type TemplateApplied struct {
	Name, Language, Category string
	Previous, Status         string
	// Changed is false when the template already had the status (or the
	// change was stale).
	Changed bool
	// Held, Released and Failed count the template's messages the change
	// held, sent again or failed.
	Held, Released, Failed int
}

// ErrTemplateStatus is a status no template can have.
var ErrTemplateStatus = errors.New("unknown template status")

// holdTemplateSQL holds a template's waiting messages. It goes through the
// due index by the company's accounts (never a scan of every message). A
// message another transaction has locked (a claim, an outcome, a cancel)
// is skipped rather than waited for, so that a template's change and the
// dispatchers never wait for each other in opposite orders: a skipped one
// meets the new status at its claim (the dispatcher reads it before each
// send).
const holdTemplateSQL = `
UPDATE messages SET state = 'held', hold_reason = $3, held_at = $4, updated_at = $4
WHERE id IN (SELECT id FROM messages
	WHERE template_id = $2 AND state IN ('queued', 'scheduled', 'deferred')
	  AND lane IN ('campaign', 'automation')
	  AND messaging_account_id IN (SELECT id FROM messaging_accounts WHERE company_id = $1)
	FOR UPDATE SKIP LOCKED)
  AND state IN ('queued', 'scheduled', 'deferred')
RETURNING batch_id::text, company_id, state::text, hold_reason, template_id, not_before`

// releaseTemplateSQL sends again the messages held for a template.
const releaseTemplateSQL = `
UPDATE messages SET state = 'queued', updated_at = $2
WHERE state = 'held' AND template_id = $1 AND hold_reason IN ('template_pending', 'template_paused')
RETURNING batch_id::text, company_id, state::text, hold_reason, template_id, not_before`

// failTemplateSQL fails a template's held and waiting messages. Their
// batches are locked first (failTemplate), as CompleteBatches and Cancel
// lock them, so that a cancel under way and this never wait for each
// other in opposite orders; a message locked by another transaction is
// skipped, as holdTemplateSQL skips it, and fails at its claim.
const failTemplateSQL = `
UPDATE messages SET state = 'failed', error_code = $3, error_title = $4, failed_at = $5, updated_at = $5
WHERE id IN (SELECT id FROM messages
	WHERE template_id = $2 AND batch_id = ANY($6::uuid[]) AND (state = 'held' OR (state IN ('queued', 'scheduled', 'deferred')
	  AND lane IN ('campaign', 'automation')
	  AND messaging_account_id IN (SELECT id FROM messaging_accounts WHERE company_id = $1)))
	FOR UPDATE SKIP LOCKED)
  AND state IN ('held', 'queued', 'scheduled', 'deferred')
RETURNING id, company_id, batch_id::text, phone, failed_at`

const templateBatchesSQL = `
SELECT DISTINCT batch_id::text FROM messages
WHERE template_id = $2 AND (state = 'held' OR (state IN ('queued', 'scheduled', 'deferred')
  AND lane IN ('campaign', 'automation')
  AND messaging_account_id IN (SELECT id FROM messaging_accounts WHERE company_id = $1)))`

// ApplyTemplateChange records a template's new status in one transaction
// begun on db: the template's row and its status history, the
// template.status_changed event, and what the status means for its
// messages. PENDING or PAUSED holds every waiting message that uses it
// (batch.held events); APPROVED sends the held ones again (batch.released);
// DISABLED or REJECTED fails them (132016 or 900006, with the reason),
// completing the batches that ends. A template of another company is
// ErrNotFound.
func ApplyTemplateChange(ctx context.Context, db TxDB, c TemplateChange) (TemplateApplied, error) {
	var out TemplateApplied
	switch c.Status {
	case TemplatePending, TemplateApproved, TemplateRejected, TemplatePaused, TemplateDisabled:
	default:
		return out, fmt.Errorf("%w: %q", ErrTemplateStatus, c.Status)
	}
	if c.At.IsZero() {
		c.At = time.Now()
	}
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		out = TemplateApplied{Status: c.Status}
		var changedAt time.Time
		var pausedUntil *time.Time
		err := tx.QueryRow(ctx, `SELECT name, language, category, status, status_changed_at FROM templates
			WHERE id = $1 AND company_id = $2 FOR UPDATE`, c.TemplateID, c.CompanyID).
			Scan(&out.Name, &out.Language, &out.Category, &out.Previous, &changedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("lock template %d: %w", c.TemplateID, err)
		}
		if out.Previous == c.Status || (c.Source == SourceSend && changedAt.After(c.At)) {
			return nil
		}
		if !c.PausedUntil.IsZero() && c.Status == TemplatePaused {
			pausedUntil = &c.PausedUntil
		}
		now := time.Now()
		if _, err := tx.Exec(ctx, `UPDATE templates SET status = $2, status_reason = $3, paused_until = $4,
				pause_count = pause_count + CASE WHEN $2 IN ('PAUSED', 'DISABLED') AND status <> 'PAUSED' THEN 1 ELSE 0 END,
				status_changed_at = $5
			WHERE id = $1`, c.TemplateID, c.Status, optional(c.Reason), pausedUntil, now); err != nil {
			return fmt.Errorf("update template %d: %w", c.TemplateID, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO template_status_events (template_id, company_id, status, previous_status, reason, source, at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, c.TemplateID, c.CompanyID, c.Status, out.Previous, optional(c.Reason),
			c.Source, now); err != nil {
			return fmt.Errorf("template %d history: %w", c.TemplateID, err)
		}
		out.Changed = true
		ev := events.Template{TemplateID: c.TemplateID, Name: out.Name, Language: out.Language, Category: out.Category,
			Status: c.Status, PreviousStatus: out.Previous, Reason: c.Reason, PausedUntil: pausedUntil, ChangedAt: now.UTC()}
		if err := events.Append(ctx, tx, events.Event{CompanyID: c.CompanyID, Type: events.TemplateStatusChanged, At: now, Data: ev}); err != nil {
			return err
		}
		return applyToMessages(ctx, tx, c, now, &out)
	})
	if err != nil {
		return TemplateApplied{}, fmt.Errorf("apply template %d status %s: %w", c.TemplateID, c.Status, err)
	}
	return out, nil
}

// applyToMessages holds, releases or fails the messages of a template whose
// status just changed.
func applyToMessages(ctx context.Context, tx pgx.Tx, c TemplateChange, now time.Time, out *TemplateApplied) error {
	switch c.Status {
	case TemplatePending, TemplatePaused:
		reason := HoldTemplatePaused
		if c.Status == TemplatePending {
			reason = HoldTemplatePending
		}
		rows, err := tx.Query(ctx, holdTemplateSQL, c.CompanyID, c.TemplateID, string(reason), now)
		if err != nil {
			return fmt.Errorf("hold messages of template %d: %w", c.TemplateID, err)
		}
		held := heldBatches{}
		for rows.Next() {
			var h heldRow
			var until *time.Time
			if err := rows.Scan(&h.batch, &h.company, &h.state, &h.reason, &h.template, &until); err != nil {
				rows.Close()
				return fmt.Errorf("hold messages of template %d: %w", c.TemplateID, err)
			}
			held.add(h)
			out.Held++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("hold messages of template %d: %w", c.TemplateID, err)
		}
		return held.emit(ctx, tx, events.BatchHeld, now)
	case TemplateApproved:
		n, err := releaseWith(ctx, tx, now, releaseTemplateSQL, c.TemplateID, now)
		if err != nil {
			return fmt.Errorf("release messages of template %d: %w", c.TemplateID, err)
		}
		out.Released = n
		return nil
	}
	return failTemplate(ctx, tx, c, now, out)
}

// failTemplate fails the held and waiting messages of a disabled or
// rejected template.
func failTemplate(ctx context.Context, tx pgx.Tx, c TemplateChange, now time.Time, out *TemplateApplied) error {
	code, title := TemplateFailure(TemplateStatus{Status: c.Status, Name: out.Name, Language: out.Language, Reason: c.Reason})
	rows, err := tx.Query(ctx, templateBatchesSQL, c.CompanyID, c.TemplateID)
	if err != nil {
		return fmt.Errorf("batches of template %d: %w", c.TemplateID, err)
	}
	batches, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("batches of template %d: %w", c.TemplateID, err)
	}
	if len(batches) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM batches WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE`, batches); err != nil {
		return fmt.Errorf("lock batches of template %d: %w", c.TemplateID, err)
	}
	rows, err = tx.Query(ctx, failTemplateSQL, c.CompanyID, c.TemplateID, code, title, now, batches)
	if err != nil {
		return fmt.Errorf("fail messages of template %d: %w", c.TemplateID, err)
	}
	failed, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (changedMessage, error) {
		m := changedMessage{State: StateFailed, Code: code, Title: title}
		err := r.Scan(&m.ID, &m.CompanyID, &m.BatchID, &m.Phone, &m.At)
		return m, err
	})
	if err != nil {
		return fmt.Errorf("fail messages of template %d: %w", c.TemplateID, err)
	}
	out.Failed = len(failed)
	if err := emitMessages(ctx, tx, failed); err != nil {
		return err
	}
	return CompleteBatches(ctx, tx, batches, now)
}

// TemplateStatus is a template's status, when it last changed, and what
// a failure for it names.
type TemplateStatus struct {
	Status    string
	ChangedAt time.Time
	Name      string
	Language  string
	// Reason is a rejection's or a disabling's reason.
	Reason string
}

// TemplateFailure is the code and title of a message whose template is
// DISABLED (132016) or REJECTED (900006), naming the template and the
// reason.
func TemplateFailure(t TemplateStatus) (code int, title string) {
	code, title = CodeTemplateDisabled, "Template is disabled"
	if t.Status == TemplateRejected {
		code, title = CodeTemplateRejected, "Template was rejected"
	}
	title = fmt.Sprintf("%s: %s (%s)", title, t.Name, t.Language)
	if t.Reason != "" {
		title += ": " + t.Reason
	}
	return code, title
}

// TemplateStatuses returns the status of each of the templates ids (one
// primary-key read; a dispatcher asks before it sends a claim).
func TemplateStatuses(ctx context.Context, db DB, ids []int64) (map[int64]TemplateStatus, error) {
	rows, err := db.Query(ctx, `SELECT id, status, status_changed_at, name, language, COALESCE(status_reason, '')
		FROM templates WHERE id = ANY($1::bigint[])`, ids)
	if err != nil {
		return nil, fmt.Errorf("template statuses: %w", err)
	}
	out := make(map[int64]TemplateStatus, len(ids))
	for rows.Next() {
		var id int64
		var s TemplateStatus
		if err := rows.Scan(&id, &s.Status, &s.ChangedAt, &s.Name, &s.Language, &s.Reason); err != nil {
			rows.Close()
			return nil, fmt.Errorf("template statuses: %w", err)
		}
		out[id] = s
	}
	rows.Close()
	return out, rows.Err()
}
