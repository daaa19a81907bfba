package record

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// OutcomeKind is what became of one claimed message.
type OutcomeKind string

// Outcome kinds.
const (
	// OutcomeSent: the provider accepted it (Wamid).
	OutcomeSent OutcomeKind = "sent"
	// OutcomeRetry: back to queued at NotBefore, one attempt spent.
	OutcomeRetry OutcomeKind = "retry"
	// OutcomeFailed: a permanent error, or attempts exhausted (Code, Title).
	OutcomeFailed OutcomeKind = "failed"
	// OutcomeRelease: never sent (shutdown, a claim too old): back to
	// queued at NotBefore, no attempt spent.
	OutcomeRelease OutcomeKind = "release"
	// OutcomeHold: not sent now, waiting for something outside Parley
	// (Reason; TemplateID for a template hold), no attempt spent: held, or
	// queued again when the template came back meanwhile. A messaging limit
	// hold is due again at NotBefore.
	OutcomeHold OutcomeKind = "hold"
	// OutcomeTouch changes no message; it only has its batch's status
	// checked (a claim that skipped an opted-out contact).
	OutcomeTouch OutcomeKind = ""
)

// Outcome is the result of one claimed message.
type Outcome struct {
	Kind      OutcomeKind
	ID        int64
	BatchID   string
	ClaimedAt time.Time
	Wamid     string
	Code      int
	Title     string
	NotBefore time.Time
	At        time.Time
	// Reason and TemplateID are a hold's.
	Reason     HoldReason
	TemplateID int64
}

// recordSQL applies outcomes to the claims they belong to: a row whose claim
// was taken back by the lease and claimed again (another claimed_at) is left
// alone; a row the lease put back in queued but nobody claimed yet still
// takes its outcome, which closes most of the duplicate window after a long
// outage. Such a row may have been cancelled meanwhile: a send still
// records (the provider has it), other outcomes leave it cancelled. The
// A message whose contact was erased while it was being sent (phone ”:
// EraseContact) records its send without the wamid (it encodes the number)
// and is cancelled instead of queued again by a retry or a release. The
// ids are looked up by the primary key (m.id = ANY): joined to the unnest
// alone, a table the planner has no statistics for yet (a fresh one, or
// one grown faster than autovacuum analyses it) was scanned whole, with
// every open message hashed, on every flush.
const recordSQL = `
UPDATE messages m SET
	state = (CASE WHEN r.kind = 'sent' THEN 'sent' WHEN r.kind = 'failed' THEN 'failed' WHEN m.phone = '' THEN 'cancelled'
		ELSE 'queued' END)::message_state,
	provider_message_id = CASE WHEN r.kind = 'sent' AND m.phone <> '' THEN r.wamid ELSE m.provider_message_id END,
	cancelled_at = CASE WHEN r.kind IN ('retry', 'release') AND m.phone = '' THEN r.at ELSE m.cancelled_at END,
	error_code = CASE r.kind WHEN 'sent' THEN NULL WHEN 'release' THEN m.error_code ELSE r.code END,
	error_title = CASE r.kind WHEN 'sent' THEN NULL WHEN 'release' THEN m.error_title ELSE r.title END,
	attempts = m.attempts + CASE r.kind WHEN 'release' THEN 0 ELSE 1 END,
	not_before = CASE WHEN r.kind IN ('retry', 'release') THEN r.not_before ELSE m.not_before END,
	sent_at = CASE r.kind WHEN 'sent' THEN r.at ELSE m.sent_at END,
	failed_at = CASE r.kind WHEN 'failed' THEN r.at ELSE m.failed_at END,
	updated_at = r.at
FROM unnest($1::bigint[], $2::timestamptz[], $3::text[], $4::text[], $5::int[], $6::text[], $7::timestamptz[], $8::timestamptz[])
	AS r(id, claimed_at, kind, wamid, code, title, not_before, at)
WHERE m.id = ANY($1::bigint[]) AND m.id = r.id AND m.claimed_at = r.claimed_at
  AND (m.state IN ('sending', 'queued') OR (m.state = 'cancelled' AND r.kind = 'sent'))
RETURNING m.batch_id::text, r.kind, COALESCE(m.provider_message_id, ''), m.id, m.company_id, m.phone,
	COALESCE(m.error_code, 0), COALESCE(m.error_title, ''), r.at, m.state::text, m.cancelled_at`

// outcomeColumns are a flush's outcomes as the columns of recordSQL, with
// the batches only touched and the messages whose contact refused marketing.
type outcomeColumns struct {
	ids        []int64
	claimed    []time.Time
	kinds      []string
	wamids     []*string
	codes      []*int32
	titles     []*string
	notBefores []*time.Time
	ats        []time.Time
	touched    map[string]bool
	refused    []int64
	holds      []Outcome
}

func columnsOf(buf []Outcome) outcomeColumns {
	n := len(buf)
	c := outcomeColumns{
		ids: make([]int64, 0, n), claimed: make([]time.Time, 0, n), kinds: make([]string, 0, n),
		wamids: make([]*string, 0, n), codes: make([]*int32, 0, n), titles: make([]*string, 0, n),
		notBefores: make([]*time.Time, 0, n), ats: make([]time.Time, 0, n), touched: map[string]bool{},
	}
	for _, o := range buf {
		if o.Kind == OutcomeTouch {
			c.touched[o.BatchID] = true
			continue
		}
		if o.Kind == OutcomeHold {
			c.holds = append(c.holds, o)
			continue
		}
		if o.Kind == OutcomeFailed && o.Code == CodeUserStoppedMarketing {
			c.refused = append(c.refused, o.ID)
		}
		c.ids = append(c.ids, o.ID)
		c.claimed = append(c.claimed, o.ClaimedAt)
		c.kinds = append(c.kinds, string(o.Kind))
		c.wamids = append(c.wamids, optional(o.Wamid))
		var code *int32
		if o.Code != 0 {
			v := int32(o.Code)
			code = &v
		}
		c.codes = append(c.codes, code)
		c.titles = append(c.titles, optional(o.Title))
		var nb *time.Time
		if !o.NotBefore.IsZero() {
			t := o.NotBefore
			nb = &t
		}
		c.notBefores = append(c.notBefores, nb)
		c.ats = append(c.ats, o.At)
	}
	return c
}

// RecordOutcomes records claimed messages' outcomes in one transaction
// begun on db: each applies only to the claim it belongs to (recordSQL),
// writes its event, opts out the contacts the provider refused with
// 131050, applies the status callbacks that arrived before their wamid was
// recorded, and completes the batches it finished. It returns how many of
// each kind were recorded (an outcome whose claim was taken back and
// claimed again is not). now is the time of the batches' completion.
func RecordOutcomes(ctx context.Context, db TxDB, outs []Outcome, now time.Time) (map[OutcomeKind]int, error) {
	cols := columnsOf(outs)
	counts := map[OutcomeKind]int{}
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		clear(counts)
		sent, err := recordOutcomes(ctx, tx, cols, counts)
		if err != nil {
			return err
		}
		if err := recordHolds(ctx, tx, cols.holds, cols.touched, counts); err != nil {
			return err
		}
		if err := optOutRefused(ctx, tx, cols.refused, nil, now); err != nil {
			return err
		}
		if err := applyBacklog(ctx, tx, sent, now); err != nil {
			return err
		}
		batches := make([]string, 0, len(cols.touched))
		for b := range cols.touched {
			batches = append(batches, b)
		}
		return CompleteBatches(ctx, tx, batches, now)
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}

// recordOutcomes runs recordSQL, writes the events of the messages it sent
// or failed, adds the batches it touched to cols.touched and counts the
// outcomes by kind; it returns the wamids it recorded.
func recordOutcomes(ctx context.Context, tx pgx.Tx, cols outcomeColumns, counts map[OutcomeKind]int) ([]string, error) {
	if len(cols.ids) == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, recordSQL, cols.ids, cols.claimed, cols.kinds, cols.wamids, cols.codes, cols.titles, cols.notBefores, cols.ats)
	if err != nil {
		return nil, fmt.Errorf("record outcomes: %w", err)
	}
	var sent []string
	var changed, counted []changedMessage
	for rows.Next() {
		var batch, kind, wamid, state string
		var cancelledAt *time.Time
		var m changedMessage
		if err := rows.Scan(&batch, &kind, &wamid, &m.ID, &m.CompanyID, &m.Phone, &m.Code, &m.Title, &m.At,
			&state, &cancelledAt); err != nil {
			rows.Close()
			return nil, fmt.Errorf("record outcomes: %w", err)
		}
		cols.touched[batch] = true
		counts[OutcomeKind(kind)]++
		if kind == string(OutcomeSent) && wamid != "" {
			sent = append(sent, wamid)
		}
		switch {
		case kind == string(OutcomeSent) || kind == string(OutcomeFailed):
			m.BatchID, m.State, m.Wamid = batch, State(kind), wamid
			if cancelledAt != nil && kind == string(OutcomeSent) {
				// Cancelled after the lease took the claim back, sent by
				// the claim all the same.
				m.Prior, m.PriorAt = StateCancelled, *cancelledAt
			}
			changed = append(changed, m)
		case State(state) == StateCancelled:
			// A retry or release of a message whose contact was erased
			// (EraseContact): it is cancelled, without an event (it
			// names no one).
			counted = append(counted, changedMessage{BatchID: batch, State: StateCancelled, At: m.At})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("record outcomes: %w", err)
	}
	if err := countMessages(ctx, tx, counted); err != nil {
		return nil, err
	}
	return sent, emitMessages(ctx, tx, changed)
}
