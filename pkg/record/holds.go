package record

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/pkg/events"
)

// HoldReason is why a held message waits (messages.hold_reason).
type HoldReason string

// Hold reasons.
const (
	// HoldTemplatePending: its template is not approved yet.
	HoldTemplatePending HoldReason = "template_pending"
	// HoldTemplatePaused: its template is paused by the provider.
	HoldTemplatePaused HoldReason = "template_paused"
	// HoldMessagingLimit: the portfolio's messaging limit has no room for a
	// new user until not_before.
	HoldMessagingLimit HoldReason = "messaging_limit"
	// HoldMarketingLimit: the provider refused it with 131049 (the user's
	// marketing message limit): it is sent once more after the
	// dispatcher's PARLEY_DISPATCH_MARKETING_LIMIT_RETRY; a second 131049
	// fails it.
	HoldMarketingLimit HoldReason = "marketing_limit"
)

// HoldReasons lists every hold reason.
var HoldReasons = []HoldReason{HoldTemplatePending, HoldTemplatePaused, HoldMessagingLimit, HoldMarketingLimit}

// CodeMarketingLimit is the provider's 131049: the user's marketing
// message limit ("healthy ecosystem engagement").
const CodeMarketingLimit = 131049

// holdSQL records hold outcomes: a claimed message goes to held with its
// reason, no attempt spent, unless its template came back meanwhile (a
// template hold whose template is APPROVED now goes back to queued, due at
// once). The templates are share-locked first, so that a change of one
// (ApplyTemplateChange, which locks it for update) either sees these
// messages held or is seen by this statement.
const holdSQL = `
WITH t AS (
	SELECT id, status FROM templates WHERE id = ANY($9::bigint[]) ORDER BY id FOR SHARE
)
UPDATE messages m SET
	state = (CASE WHEN m.phone = '' THEN 'cancelled'
		WHEN r.reason IN ('messaging_limit', 'marketing_limit') OR t.status IN ('PENDING', 'PAUSED') THEN 'held'
		ELSE 'queued' END)::message_state,
	cancelled_at = CASE WHEN m.phone = '' THEN r.at ELSE m.cancelled_at END,
	marketing_retry_at = CASE WHEN r.reason = 'marketing_limit' THEN r.at ELSE m.marketing_retry_at END,
	hold_reason = r.reason,
	held_at = r.at,
	error_code = COALESCE(r.code, m.error_code),
	error_title = COALESCE(r.title, m.error_title),
	not_before = r.not_before,
	updated_at = r.at
FROM unnest($1::bigint[], $2::timestamptz[], $3::text[], $4::int[], $5::text[], $6::timestamptz[], $7::timestamptz[], $8::bigint[])
	AS r(id, claimed_at, reason, code, title, not_before, at, template_id)
	LEFT JOIN t ON t.id = r.template_id
WHERE m.id = ANY($1::bigint[]) AND m.id = r.id AND m.claimed_at = r.claimed_at AND m.state IN ('sending', 'queued')
RETURNING m.batch_id::text, m.company_id, m.state::text, r.reason, COALESCE(r.template_id, 0), r.not_before`

// recordHolds writes the hold outcomes of a flush (Outcome.Kind OutcomeHold)
// and their batch.held events.
func recordHolds(ctx context.Context, tx pgx.Tx, holds []Outcome, touched map[string]bool, counts map[OutcomeKind]int) error {
	if len(holds) == 0 {
		return nil
	}
	n := len(holds)
	ids, claimed, reasons := make([]int64, 0, n), make([]time.Time, 0, n), make([]string, 0, n)
	codes, titles := make([]*int32, 0, n), make([]*string, 0, n)
	notBefore, ats, tpls := make([]time.Time, 0, n), make([]time.Time, 0, n), make([]*int64, 0, n)
	var tplIDs []int64
	for _, o := range holds {
		ids, claimed, reasons = append(ids, o.ID), append(claimed, o.ClaimedAt), append(reasons, string(o.Reason))
		var code *int32
		if o.Code != 0 {
			v := int32(o.Code)
			code = &v
		}
		codes, titles = append(codes, code), append(titles, optional(o.Title))
		nb := o.NotBefore
		if nb.IsZero() {
			nb = o.At
		}
		notBefore, ats, tpls = append(notBefore, nb), append(ats, o.At), append(tpls, optional(o.TemplateID))
		if o.TemplateID != 0 {
			tplIDs = append(tplIDs, o.TemplateID)
		}
	}
	rows, err := tx.Query(ctx, holdSQL, ids, claimed, reasons, codes, titles, notBefore, ats, tpls, tplIDs)
	if err != nil {
		return fmt.Errorf("record holds: %w", err)
	}
	held := heldBatches{}
	for rows.Next() {
		var h heldRow
		if err := rows.Scan(&h.batch, &h.company, &h.state, &h.reason, &h.template, &h.until); err != nil {
			rows.Close()
			return fmt.Errorf("record holds: %w", err)
		}
		touched[h.batch] = true
		counts[OutcomeHold]++
		if State(h.state) == StateHeld {
			held.add(h)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("record holds: %w", err)
	}
	return held.emit(ctx, tx, events.BatchHeld, time.Now())
}

// heldRow is one message a hold or a release changed.
type heldRow struct {
	batch    string
	company  int64
	state    string
	reason   string
	template int64
	until    time.Time
}

// heldBatches groups held or released messages by batch and reason: one
// batch.held or batch.released event each.
type heldBatches map[heldKey]*heldEvent

type heldKey = [2]string

type heldEvent struct {
	company int64
	ev      events.Hold
}

func (h heldBatches) add(r heldRow) {
	k := heldKey{r.batch, r.reason}
	e := h[k]
	if e == nil {
		e = &heldEvent{company: r.company, ev: events.Hold{BatchID: r.batch, Reason: r.reason, TemplateID: r.template}}
		h[k] = e
	}
	e.ev.Messages++
	if r.reason == string(HoldMessagingLimit) && !r.until.IsZero() && (e.ev.Until == nil || r.until.Before(*e.ev.Until)) {
		u := r.until.UTC()
		e.ev.Until = &u
	}
}

func (h heldBatches) emit(ctx context.Context, tx DB, t events.Type, at time.Time) error {
	if len(h) == 0 {
		return nil
	}
	names, err := templateNames(ctx, tx, h)
	if err != nil {
		return err
	}
	keys := make([]heldKey, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i][0] < keys[j][0] || keys[i][0] == keys[j][0] && keys[i][1] < keys[j][1]
	})
	evs := make([]events.Event, 0, len(h))
	for _, k := range keys {
		e := h[k]
		e.ev.TemplateName = names[e.ev.TemplateID]
		e.ev.ChangedAt = at.UTC()
		evs = append(evs, events.Event{CompanyID: e.company, Type: t, At: at, Data: e.ev})
	}
	return events.Append(ctx, tx, evs...)
}

func templateNames(ctx context.Context, tx DB, h heldBatches) (map[int64]string, error) {
	var ids []int64
	for _, e := range h {
		if e.ev.TemplateID != 0 {
			ids = append(ids, e.ev.TemplateID)
		}
	}
	out := map[int64]string{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := tx.Query(ctx, `SELECT id, name FROM templates WHERE id = ANY($1::bigint[])`, ids)
	if err != nil {
		return nil, fmt.Errorf("template names: %w", err)
	}
	for rows.Next() {
		var id int64
		var name string
		if err := rows.Scan(&id, &name); err != nil {
			rows.Close()
			return nil, fmt.Errorf("template names: %w", err)
		}
		out[id] = name
	}
	rows.Close()
	return out, rows.Err()
}

// releaseDueSQL sends again the messages the messaging limit held whose
// room has come, and those 131049 held for their retry ($2 after it).
const releaseDueSQL = `
UPDATE messages SET state = 'queued', not_before = $1, updated_at = $1
WHERE state = 'held' AND (hold_reason = 'messaging_limit' AND not_before <= $1
	OR hold_reason = 'marketing_limit' AND not_before <= $1 - $2::interval)
RETURNING batch_id::text, company_id, state::text, hold_reason, 0::bigint, not_before`

// ReleaseDueHolds sends again, at now, the messages held for the messaging
// limit whose room has come (not_before), and those held by 131049 at
// least marketingRetry ago, with their batch.released events, and returns
// how many.
func ReleaseDueHolds(ctx context.Context, db TxDB, now time.Time, marketingRetry time.Duration) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var err error
		n, err = releaseWith(ctx, tx, now, releaseDueSQL, now, marketingRetry)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("release held messages: %w", err)
	}
	return n, nil
}

// releaseWith runs a release statement (RETURNING as releaseDueSQL) and
// writes its batch.released events.
func releaseWith(ctx context.Context, tx pgx.Tx, now time.Time, sql string, args ...any) (int, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return 0, err
	}
	out := heldBatches{}
	n := 0
	for rows.Next() {
		var h heldRow
		if err := rows.Scan(&h.batch, &h.company, &h.state, &h.reason, &h.template, &h.until); err != nil {
			rows.Close()
			return 0, err
		}
		h.until = time.Time{}
		out.add(h)
		n++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	return n, out.emit(ctx, tx, events.BatchReleased, now)
}

// HeldCount is how many of a batch's messages are held for one reason, and
// from when the first of them may go (messaging_limit only).
type HeldCount struct {
	Reason   HoldReason `json:"reason"`
	Messages int        `json:"messages"`
	// TemplateName names the template a template hold waits for.
	TemplateName string `json:"template_name,omitempty"`
	// Until is when the first messages held for the messaging limit may go.
	Until *time.Time `json:"until,omitempty"`
}

// BatchHeld counts a batch's held messages by reason (served by
// messages_batch_state_idx).
func BatchHeld(ctx context.Context, db DB, batchID string) ([]HeldCount, error) {
	rows, err := db.Query(ctx, `
		SELECT m.hold_reason, count(*), COALESCE(min(t.name), ''),
			min(m.not_before) FILTER (WHERE m.hold_reason = 'messaging_limit')
		FROM messages m LEFT JOIN templates t ON t.id = m.template_id AND m.hold_reason <> 'messaging_limit'
		WHERE m.batch_id = $1 AND m.state = 'held'
		GROUP BY m.hold_reason ORDER BY m.hold_reason`, batchID)
	if err != nil {
		return nil, fmt.Errorf("held messages of batch %s: %w", batchID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (HeldCount, error) {
		var h HeldCount
		var reason string
		err := r.Scan(&reason, &h.Messages, &h.TemplateName, &h.Until)
		h.Reason = HoldReason(reason)
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("held messages of batch %s: %w", batchID, err)
	}
	return out, nil
}

// holdMarketingSQL holds, for their one retry, messages the provider just
// failed with 131049 that were never retried for it: no longer sent (their
// wamid and send time cleared, so that the retry is a send of its own),
// due again after the dispatcher's retry delay (ReleaseDueHolds). It
// returns each one's former send time.
const holdMarketingSQL = `
WITH old AS (
	SELECT id, sent_at FROM messages WHERE id = ANY($1::bigint[]) AND state = 'failed' AND error_code = 131049
	  AND marketing_retry_at IS NULL FOR UPDATE
)
UPDATE messages m SET state = 'held', hold_reason = 'marketing_limit', held_at = $2, marketing_retry_at = $2,
	not_before = $2, provider_message_id = NULL, sent_at = NULL, updated_at = $2
FROM old WHERE m.id = old.id
RETURNING m.id, m.batch_id::text, m.company_id, old.sent_at`

// holdMarketingLimited holds the messages of changed that a status just
// failed with 131049 for the first time (holdMarketingSQL) and returns the
// others: a held one writes no message.failed event and no failure
// counter, and its send is counted back (its retry will count again);
// batch.held events say how many of each batch wait.
func holdMarketingLimited(ctx context.Context, db DB, changed []changedMessage, d deltas, now time.Time) ([]changedMessage, error) {
	var ids []int64
	for _, m := range changed {
		if m.State == StateFailed && m.Code == CodeMarketingLimit {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		return changed, nil
	}
	rows, err := db.Query(ctx, holdMarketingSQL, ids, now)
	if err != nil {
		return nil, fmt.Errorf("hold messages refused with 131049: %w", err)
	}
	held := map[int64]bool{}
	out := heldBatches{}
	for rows.Next() {
		var id, company int64
		var batch string
		var sentAt *time.Time
		if err := rows.Scan(&id, &batch, &company, &sentAt); err != nil {
			rows.Close()
			return nil, fmt.Errorf("hold messages refused with 131049: %w", err)
		}
		held[id] = true
		if sentAt != nil {
			d.add(batch, *sentAt, metricSent, 0, "", -1)
			d.add(batch, *sentAt, metricLeft, 0, "", -1)
		}
		out.add(heldRow{batch: batch, company: company, state: string(StateHeld), reason: string(HoldMarketingLimit)})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("hold messages refused with 131049: %w", err)
	}
	keep := changed[:0]
	for _, m := range changed {
		if !held[m.ID] {
			keep = append(keep, m)
		}
	}
	return keep, out.emit(ctx, db, events.BatchHeld, now)
}
