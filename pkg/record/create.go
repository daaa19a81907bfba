package record

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/contacts"
)

// The expansion of a batch into its messages (pkg/delivery's Expander)
// writes through these, in one transaction per batch: LockBatch records the
// batch and locks it, one of the Insert functions creates its messages,
// and FinishExpansion (or FinishCancelled) records its status.

// BatchRow is a batch as its expansion records it.
type BatchRow struct {
	ID           string
	CompanyID    int64
	Kind         bus.BatchKind
	Source       bus.Source
	CampaignID   *int64
	AutomationID *int64
	SegmentID    *int64
	ContactCount int
	IsForced     bool
	ScheduledAt  *time.Time
	// IdempotencyKey is the request's Idempotency-Key; "" records NULL.
	IdempotencyKey string
	AcceptedAt     time.Time
	// Overrides is batches.overrides: the request's media and URLs (JSON).
	Overrides []byte
}

// CompanyMismatchError is a batch delivered for another company than the
// one it is recorded for: a message that contradicts the record.
type CompanyMismatchError struct {
	BatchID            string
	Recorded, Received int64
}

func (e *CompanyMismatchError) Error() string {
	return fmt.Sprintf("batch %s is recorded for company %d, the message says %d", e.BatchID, e.Recorded, e.Received)
}

// LockBatch records the batch (an earlier delivery may have done it) and
// locks its row, so that concurrent deliveries of one batch expand it once.
// fresh is false when it was expanded before. cancelled is whether the
// batch was cancelled while it waited in the stream (CancelPending
// recorded it with status cancelled): it is expanded all the same, and
// FinishCancelled cancels its messages in the same transaction. A batch
// recorded for another company is a *CompanyMismatchError.
func LockBatch(ctx context.Context, tx pgx.Tx, r BatchRow) (fresh, cancelled bool, err error) {
	if _, err := tx.Exec(ctx, `
		INSERT INTO batches (id, company_id, kind, source, campaign_id, automation_id, segment_id, contact_count,
			is_forced, scheduled_at, status, idempotency_key, accepted_at, overrides, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'accepted', $11, $12, $13, $14)
		ON CONFLICT (id) DO NOTHING`,
		r.ID, r.CompanyID, r.Kind, r.Source, r.CampaignID, r.AutomationID, r.SegmentID, r.ContactCount,
		r.IsForced, r.ScheduledAt, optional(r.IdempotencyKey), r.AcceptedAt, r.Overrides, r.AcceptedAt); err != nil {
		return false, false, fmt.Errorf("record batch: %w", err)
	}
	var company int64
	var status string
	var expanded bool
	if err := tx.QueryRow(ctx, `
		SELECT company_id, status::text, EXISTS (SELECT 1 FROM messages WHERE batch_id = b.id)
		FROM batches b WHERE id = $1 FOR UPDATE`, r.ID).Scan(&company, &status, &expanded); err != nil {
		return false, false, fmt.Errorf("lock batch: %w", err)
	}
	if company != r.CompanyID {
		return false, false, &CompanyMismatchError{BatchID: r.ID, Recorded: company, Received: r.CompanyID}
	}
	if expanded {
		return false, false, nil
	}
	switch BatchState(status) {
	case BatchAccepted:
		return true, false, nil
	case BatchCancelled:
		// The cancel recorded what the stream said; the batch itself knows
		// its targets and options.
		if _, err := tx.Exec(ctx, `
			UPDATE batches SET campaign_id = $2, automation_id = $3, segment_id = $4, is_forced = $5,
				scheduled_at = $6, idempotency_key = $7, overrides = $8, status = 'accepted'
			WHERE id = $1`,
			r.ID, r.CampaignID, r.AutomationID, r.SegmentID, r.IsForced, r.ScheduledAt, optional(r.IdempotencyKey), r.Overrides); err != nil {
			return false, false, fmt.Errorf("record cancelled batch %s: %w", r.ID, err)
		}
		return true, true, nil
	}
	return false, false, nil
}

// FinishCancelled ends the expansion of a batch cancelled in the stream:
// its new messages become cancelled and its status follows (see
// CompleteBatches): cancelled, even when its targets were gone (its failed
// messages say so).
func FinishCancelled(ctx context.Context, tx pgx.Tx, id string, count int, failure string, now time.Time) error {
	if err := FinishExpansion(ctx, tx, id, BatchProcessing, count, failure, now); err != nil {
		return err
	}
	return CompleteBatches(ctx, tx, []string{id}, now)
}

// FinishExpansion records an expanded batch's status, its message count
// and its failure ("" unless it failed), with the events of its failed
// messages, and of the batch when it is already completed or failed.
func FinishExpansion(ctx context.Context, tx pgx.Tx, id string, status BatchState, count int, failure string, now time.Time) error {
	var completed *time.Time
	if status == BatchCompleted || status == BatchFailed {
		completed = &now
	}
	var company int64
	var kind string
	if err := tx.QueryRow(ctx, `
		UPDATE batches SET status = $2, contact_count = $3, error = NULLIF($4, ''), completed_at = $5 WHERE id = $1
		RETURNING company_id, kind::text`,
		id, string(status), count, failure, completed).Scan(&company, &kind); err != nil {
		return fmt.Errorf("update batch %s: %w", id, err)
	}
	if err := countAccepted(ctx, tx, id); err != nil {
		return err
	}
	if err := emitFailedAtExpansion(ctx, tx, id); err != nil {
		return err
	}
	if completed == nil {
		return nil
	}
	return emitBatches(ctx, tx, []finishedBatch{{id: id, companyID: company, kind: kind, status: status, failure: failure, at: now}})
}

// InsertFailed records one failed message per phone, saying why.
func InsertFailed(ctx context.Context, tx pgx.Tx, lane Lane, batchID string, companyID int64, phones []string, why string, now time.Time) error {
	_, err := tx.Exec(ctx, `
		INSERT INTO messages (batch_id, seq, company_id, phone, state, lane, error_title, failed_at, not_before, created_at, updated_at)
		SELECT $1, p.ord - 1, $2, p.phone, 'failed', $3, $4, $5, $5, (SELECT accepted_at FROM batches WHERE id = $1), $5
		FROM unnest($6::text[]) WITH ORDINALITY AS p(phone, ord)
		ON CONFLICT (batch_id, seq, created_at) DO NOTHING`, batchID, companyID, string(lane), why, now, phones)
	if err != nil {
		return fmt.Errorf("record failed messages of batch %s: %w", batchID, err)
	}
	return nil
}

// NewMessages is what the messages one expansion creates share (an
// automation trigger's are queued with BypassRules; a message batch's
// entries name their own account and template).
type NewMessages struct {
	BatchID    string
	CompanyID  int64
	AccountID  int64
	TemplateID int64
	// State is queued or scheduled, due at NotBefore.
	State       State
	NotBefore   time.Time
	BypassRules bool
	At          time.Time
}

// InsertSegmentMessages creates one campaign message per member of a
// segment, in contact order, and returns how many it created.
func InsertSegmentMessages(ctx context.Context, tx pgx.Tx, m NewMessages, segmentID int64) (int, error) {
	t, err := tx.Exec(ctx, `
		INSERT INTO messages (batch_id, seq, company_id, contact_id, phone, messaging_account_id, state, not_before,
			lane, template_id, bypass_rules, created_at, updated_at)
		SELECT $1, (row_number() OVER (ORDER BY c.id)) - 1, $2, c.id, c.phone, $3, $4, $5, 'campaign', $6, $7,
			(SELECT accepted_at FROM batches WHERE id = $1), $8
		FROM segment_members sm JOIN contacts c ON c.id = sm.contact_id
		WHERE sm.segment_id = $9 AND c.company_id = $2
		ON CONFLICT (batch_id, seq, created_at) DO NOTHING`,
		m.BatchID, m.CompanyID, m.AccountID, string(m.State), m.NotBefore, m.TemplateID, m.BypassRules, m.At, segmentID)
	if err != nil {
		return 0, fmt.Errorf("expand batch %s: %w", m.BatchID, err)
	}
	return int(t.RowsAffected()), nil
}

// InsertPhoneMessages creates one campaign message per phone, in order, and
// returns how many it created.
func InsertPhoneMessages(ctx context.Context, tx pgx.Tx, m NewMessages, phones []string) (int, error) {
	t, err := tx.Exec(ctx, `
		INSERT INTO messages (batch_id, seq, company_id, contact_id, phone, messaging_account_id, state, not_before,
			lane, template_id, bypass_rules, created_at, updated_at)
		SELECT $1, p.ord - 1, $2, c.id, p.phone, $3, $4, $5, 'campaign', $6, $7, (SELECT accepted_at FROM batches WHERE id = $1), $8
		FROM unnest($9::text[]) WITH ORDINALITY AS p(phone, ord)
		LEFT JOIN contacts c ON c.company_id = $2 AND c.phone = p.phone
		ON CONFLICT (batch_id, seq, created_at) DO NOTHING`,
		m.BatchID, m.CompanyID, m.AccountID, string(m.State), m.NotBefore, m.TemplateID, m.BypassRules, m.At, phones)
	if err != nil {
		return 0, fmt.Errorf("expand batch %s: %w", m.BatchID, err)
	}
	return int(t.RowsAffected()), nil
}

// insertCampaignSQL creates a fresh campaign batch's messages from src (a
// query of seq, phone, contact_id, first_name, last_name, variables,
// opted_out_at), the first $10 claimed at $8 (sending, or skipped_opt_out
// for a contact who opted out of a non-forced batch) and the others in
// state $4, and returns the claimed ones with what rendering needs, each
// with the count of every message inserted. Without ON CONFLICT (a
// speculative insertion costs a WAL record per row): the caller holds the
// lock of a batch that has no message yet (lockBatch; a batch cancelled in
// the stream, which a concurrent delivery may find so, is never claimed).
const insertCampaignSQL = `
WITH src AS (%s), ins AS (
	INSERT INTO messages (batch_id, seq, company_id, contact_id, phone, messaging_account_id, state, not_before,
		lane, template_id, bypass_rules, created_at, updated_at, claimed_at, skipped_at)
	SELECT $1, s.seq, $2, s.contact_id, s.phone, $3,
		(CASE WHEN s.seq >= $10 THEN $4
			WHEN NOT $7 AND s.opted_out_at IS NOT NULL THEN 'skipped_opt_out' ELSE 'sending' END)::message_state,
		$5, 'campaign', $6, $7, (SELECT accepted_at FROM batches WHERE id = $1), $8,
		CASE WHEN s.seq < $10 THEN $8::timestamptz END,
		CASE WHEN s.seq < $10 AND NOT $7 AND s.opted_out_at IS NOT NULL THEN $8::timestamptz END
	FROM src s
	RETURNING id, seq, state
)
SELECT i.id, i.state::text, s.phone, COALESCE(s.first_name, ''), COALESCE(s.last_name, ''), s.variables, i.total
FROM (SELECT ins.*, count(*) OVER () AS total FROM ins) i JOIN src s ON s.seq = i.seq
WHERE i.seq < $10`

// campaignFromPhones is insertCampaignSQL's source for a list of phones ($9).
const campaignFromPhones = `
	SELECT (p.ord - 1)::int AS seq, p.phone, c.id AS contact_id, c.first_name, c.last_name, c.variables, c.opted_out_at
	FROM unnest($9::text[]) WITH ORDINALITY AS p(phone, ord)
	LEFT JOIN contacts c ON c.company_id = $2 AND c.phone = p.phone`

// InsertClaimedPhoneMessages creates a fresh campaign batch's messages for
// phones like InsertPhoneMessages, but its first claim of them already
// claimed at m.At for the caller (the hand-off: sending, or skipped_opt_out
// with its message.skipped event for a contact who opted out of a
// non-forced batch). It returns how many messages it created, the claimed
// ones with what rendering needs, and how many of those were skipped. The
// caller holds the lock of a batch that has no message yet (LockBatch) and
// was not cancelled in the stream.
func InsertClaimedPhoneMessages(ctx context.Context, tx pgx.Tx, m NewMessages, phones []string, claim int) (total int, claimed []Claimed, skipped int, err error) {
	rows, err := tx.Query(ctx, fmt.Sprintf(insertCampaignSQL, campaignFromPhones),
		m.BatchID, m.CompanyID, m.AccountID, string(m.State), m.NotBefore, m.TemplateID, m.BypassRules, m.At, phones, claim)
	if err != nil {
		return 0, nil, 0, fmt.Errorf("expand batch %s: %w", m.BatchID, err)
	}
	var skips []changedMessage
	claimed, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Claimed, error) {
		c := Claimed{BatchID: m.BatchID, TemplateID: m.TemplateID, ClaimedAt: m.At}
		var state string
		var vars []byte
		var n int64
		if err := r.Scan(&c.ID, &state, &c.Phone, &c.FirstName, &c.LastName, &vars, &n); err != nil {
			return c, err
		}
		total, c.State = int(n), State(state)
		if c.State == StateSkippedOptOut {
			skips = append(skips, changedMessage{ID: c.ID, CompanyID: m.CompanyID, BatchID: m.BatchID, Phone: c.Phone,
				State: StateSkippedOptOut, At: m.At})
		}
		v, err := contacts.DecodeVariables(vars)
		c.Variables = v
		return c, err
	})
	if err != nil {
		return 0, nil, 0, fmt.Errorf("expand batch %s: %w", m.BatchID, err)
	}
	if err := emitMessages(ctx, tx, skips); err != nil {
		return 0, nil, 0, err
	}
	return total, claimed, len(skips), nil
}

// HasOlderDue reports whether a lane's account has messages due at now
// that wait already (a hand-off must not overtake them).
func HasOlderDue(ctx context.Context, tx pgx.Tx, lane Lane, accountID int64, now time.Time) (bool, error) {
	var older bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM messages WHERE lane = $1 AND messaging_account_id = $2
		AND state IN ('queued', 'scheduled', 'deferred') AND not_before <= $3)`,
		string(lane), accountID, now).Scan(&older); err != nil {
		return false, fmt.Errorf("due messages of account %d: %w", accountID, err)
	}
	return older, nil
}

// AutomationMessage is one contact's message of an automation trigger.
type AutomationMessage struct {
	ContactID int64
	Phone     string
	// Overrides is messages.overrides as JSON ("{}" for none).
	Overrides string
}

// InsertAutomationMessages creates an automation trigger's messages, in
// order, queued at m.At with bypass_rules, and returns how many it created.
func InsertAutomationMessages(ctx context.Context, tx pgx.Tx, m NewMessages, msgs []AutomationMessage) (int, error) {
	n := len(msgs)
	seqs, ids, phones, ovs := make([]int32, n), make([]int64, n), make([]string, n), make([]string, n)
	for i, a := range msgs {
		seqs[i], ids[i], phones[i], ovs[i] = int32(i), a.ContactID, a.Phone, a.Overrides
	}
	t, err := tx.Exec(ctx, `
		INSERT INTO messages (batch_id, seq, company_id, contact_id, phone, messaging_account_id, state, not_before,
			lane, template_id, bypass_rules, overrides, created_at, updated_at)
		SELECT $1, u.seq, $2, u.contact_id, u.phone, $3, 'queued', $4, 'automation', $5, true,
			NULLIF(u.ov, '{}')::jsonb, (SELECT accepted_at FROM batches WHERE id = $1), $4
		FROM unnest($6::int[], $7::bigint[], $8::text[], $9::text[]) AS u(seq, contact_id, phone, ov)
		ON CONFLICT (batch_id, seq, created_at) DO NOTHING`,
		m.BatchID, m.CompanyID, m.AccountID, m.At, m.TemplateID, seqs, ids, phones, ovs)
	if err != nil {
		return 0, fmt.Errorf("expand batch %s: %w", m.BatchID, err)
	}
	return int(t.RowsAffected()), nil
}

// BatchEntry is one message of a message batch: its own account and
// template (nil when its target is gone), its overrides (JSON), and why it
// cannot be sent ("" when it can; it is then created failed).
type BatchEntry struct {
	Phone      string
	AccountID  *int64
	TemplateID *int64
	Overrides  string
	Failure    string
}

// InsertBatchMessages creates a message batch's messages, in order: each
// in m.State due at m.NotBefore, or failed with its Failure; linked to
// the company's contact of its phone when there is one. m.AccountID and
// m.TemplateID are not used (each entry has its own). It returns how many
// it created.
func InsertBatchMessages(ctx context.Context, tx pgx.Tx, m NewMessages, entries []BatchEntry) (int, error) {
	n := len(entries)
	seqs, phones, states, ovs := make([]int32, n), make([]string, n), make([]string, n), make([]string, n)
	accounts, templates, failures := make([]*int64, n), make([]*int64, n), make([]*string, n)
	for i, e := range entries {
		seqs[i], phones[i], ovs[i], accounts[i], templates[i] = int32(i), e.Phone, e.Overrides, e.AccountID, e.TemplateID
		states[i] = string(m.State)
		if e.Failure != "" {
			states[i], failures[i] = string(StateFailed), &entries[i].Failure
		}
	}
	t, err := tx.Exec(ctx, `
		INSERT INTO messages (batch_id, seq, company_id, contact_id, phone, messaging_account_id, state, not_before,
			lane, template_id, bypass_rules, overrides, error_title, failed_at, created_at, updated_at)
		SELECT $1, u.seq, $2, c.id, u.phone, u.account, u.state::message_state, $3, 'campaign', u.template, $4,
			NULLIF(u.ov, '{}')::jsonb, u.failure, CASE WHEN u.failure IS NULL THEN NULL ELSE $5::timestamptz END,
			(SELECT accepted_at FROM batches WHERE id = $1), $5
		FROM unnest($6::int[], $7::text[], $8::bigint[], $9::bigint[], $10::text[], $11::text[], $12::text[])
			AS u(seq, phone, account, template, state, ov, failure)
		LEFT JOIN contacts c ON c.company_id = $2 AND c.phone = u.phone
		ON CONFLICT (batch_id, seq, created_at) DO NOTHING`,
		m.BatchID, m.CompanyID, m.NotBefore, m.BypassRules, m.At, seqs, phones, accounts, templates, states, ovs, failures)
	if err != nil {
		return 0, fmt.Errorf("expand batch %s: %w", m.BatchID, err)
	}
	return int(t.RowsAffected()), nil
}

// With is a contact's overrides completed by the request's (its own media
// win; the URLs are the request's), as messages.overrides.
func (ov Overrides) With(req Overrides) (string, error) {
	if ov.ImageURL == "" {
		ov.ImageURL = req.ImageURL
	}
	if ov.VideoURL == "" {
		ov.VideoURL = req.VideoURL
	}
	ov.URL, ov.URL2 = req.URL, req.URL2
	if len(ov.Variables) == 0 {
		ov.Variables = nil
	}
	raw, err := json.Marshal(ov)
	if err != nil {
		return "", fmt.Errorf("message overrides: %w", err)
	}
	return string(raw), nil
}

// Reply is the one message of a reply (POST /api/messages): a session
// message (Content, whatsapp.Session as JSON) or a template with its
// variables (TemplateID, Overrides), to Phone from AccountID, recorded with
// the id the gateway took for it from the messages' sequence.
type Reply struct {
	ID         int64
	Phone      string
	AccountID  int64
	TemplateID int64
	Content    []byte
	// Overrides is messages.overrides as JSON ("{}" for none).
	Overrides string
}

// InsertReply creates a reply's message, queued at m.At on the automation
// lane with bypass_rules (a reply is not marketing: opt-out and delivery
// hours do not hold it back), linked to the company's contact of its phone,
// and returns how many it created (0 when an earlier delivery did).
func InsertReply(ctx context.Context, tx pgx.Tx, m NewMessages, r Reply) (int, error) {
	var tpl *int64
	if r.TemplateID != 0 {
		tpl = &r.TemplateID
	}
	t, err := tx.Exec(ctx, `
		INSERT INTO messages (id, batch_id, seq, company_id, contact_id, phone, messaging_account_id, state, not_before,
			lane, template_id, bypass_rules, overrides, content, created_at, updated_at)
		SELECT $1, $2, 0, $3, c.id, $4, $5, 'queued', $6, 'automation', $7, true, NULLIF($8, '{}')::jsonb, $9::jsonb,
			(SELECT accepted_at FROM batches WHERE id = $2), $6
		FROM (SELECT 1) one LEFT JOIN contacts c ON c.company_id = $3 AND c.phone = $4
		ON CONFLICT (batch_id, seq, created_at) DO NOTHING`,
		r.ID, m.BatchID, m.CompanyID, r.Phone, r.AccountID, m.At, tpl, r.Overrides, r.Content)
	if err != nil {
		return 0, fmt.Errorf("expand reply %s: %w", m.BatchID, err)
	}
	return int(t.RowsAffected()), nil
}
