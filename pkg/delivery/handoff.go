package delivery

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/contacts"
)

// The hand-off: a campaign batch's expansion claims its first messages
// itself. They are inserted already claimed by this dispatcher (sending,
// claimed_at the expansion's time) or skipped for an opted-out contact,
// and given to the engine when the transaction commits, so that the
// common path writes each message once before its outcome instead of
// inserting it queued and then updating it in a claim. The claim's rules
// hold: only messages due now, of a batch not cancelled, of an account
// whose delivery hours are open (or forced), and only when the account
// has no older due message (oldest first); opt-out is read in the same
// statement, as the claim reads it. The claimed messages wait for the
// account's lane worker, which sends them before it claims more, in the
// chunks and at the pace of its claims; the engine's handed-off messages
// are bounded (Config.HandoffMax), one that waited too long is released
// unsent (engine.fresh), those still waiting at shutdown or when the
// account's delivery hours close go back to the queue, and a dispatcher
// that dies leaves them to the lease like any other claim.

// handoff is the claim a fresh batch's expansion makes for the engine: how
// many it may take, and the messages claimed once the transaction has
// committed.
type handoff struct {
	eng      *engine
	acct     catalog.MessagingAccount
	reserved int
	claimed  []claimed
	skipped  int
}

// reserve sets aside a hand-off of up to n messages: at most one second of
// the account's throughput, at most what the account sends in half the
// time a claim may wait (less what waits for it already), and at most what
// keeps the engine's handed-off messages not yet taken by their lane
// worker under Config.HandoffMax; nil when
// none may be claimed now (the engine is stopping, or the account's
// delivery hours are closed to a non-forced batch). A handed-off message
// that could not start while its claim was young enough is released
// (engine.fresh), so the bound is one of memory and of the work other
// replicas cannot share, not of the lease.
func (e *engine) reserve(acct catalog.MessagingAccount, forced bool, n int, now time.Time) *handoff {
	if e == nil || e.lane != LaneCampaign || n < 1 {
		return nil
	}
	if !forced && acct.Window != nil {
		if open, _ := NextOpening(acct.Window, e.cache.location(acct.Timezone), now); !open {
			return nil
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.runCtx == nil || e.runCtx.Err() != nil {
		return nil
	}
	// What the account's throughput sends in half the time a claim may
	// wait (engine.fresh), less what already waits for it.
	perAccount := int(float64(max(acct.ThroughputPerSecond, 1))*e.sendWithin().Seconds()/2) - len(e.pending[acct.ID])
	want := min(n, max(acct.ThroughputPerSecond, 1), e.cfg.HandoffMax-e.handed, perAccount)
	if want < 1 {
		return nil
	}
	e.handed += want
	return &handoff{eng: e, acct: acct, reserved: want}
}

// unhand counts n handed-off messages as started or given back.
func (e *engine) unhand(n int) {
	e.mu.Lock()
	e.handed -= n
	e.mu.Unlock()
}

// limit is how many of the batch's first messages the insert claims: none
// when the account has older due messages (they go first), else the
// reservation.
func (h *handoff) limit(ctx context.Context, tx pgx.Tx, now time.Time) (int, error) {
	if h == nil {
		return 0, nil
	}
	var older bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM messages WHERE lane = $1 AND messaging_account_id = $2
		AND state IN ('queued', 'scheduled', 'deferred') AND not_before <= $3)`,
		string(h.eng.lane), h.acct.ID, now).Scan(&older); err != nil {
		return 0, fmt.Errorf("due messages of account %d: %w", h.acct.ID, err)
	}
	if older {
		return 0, nil
	}
	return h.reserved, nil
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
		$5, 'campaign', $6, $7, $8, $8,
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

// insertClaimed runs insertCampaignSQL (args as it numbers them, $10 the
// claim's size) and returns how many messages it created; the claimed ones
// are kept in h, their message.skipped events written with tx.
func (h *handoff) insertClaimed(ctx context.Context, tx pgx.Tx, src string, batchID string, companyID, templateID int64,
	now time.Time, args ...any) (int, error) {
	rows, err := tx.Query(ctx, fmt.Sprintf(insertCampaignSQL, src), args...)
	if err != nil {
		return 0, err
	}
	total := 0
	var skipped []changedMessage
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (claimed, error) {
		c := claimed{batchID: batchID, templateID: templateID, claimedAt: now}
		var state string
		var vars []byte
		var n int64
		if err := r.Scan(&c.id, &state, &c.phone, &c.firstName, &c.lastName, &vars, &n); err != nil {
			return c, err
		}
		total, c.state = int(n), State(state)
		if c.state == StateSkippedOptOut {
			skipped = append(skipped, changedMessage{ID: c.id, CompanyID: companyID, BatchID: batchID, Phone: c.phone,
				State: StateSkippedOptOut, At: now})
		}
		v, err := contacts.DecodeVariables(vars)
		c.variables = v
		return c, err
	})
	if err != nil {
		return 0, err
	}
	if err := emitMessages(ctx, tx, skipped); err != nil {
		return 0, err
	}
	h.claimed, h.skipped = out, len(skipped)
	return total, nil
}

// done gives the engine what the committed expansion claimed, and gives
// back the reservation it did not use (all of it when the expansion
// failed: committed is false).
func (h *handoff) done(committed bool) {
	if h == nil {
		return
	}
	e := h.eng
	if !committed {
		h.claimed, h.skipped = nil, 0
	}
	send := make([]claimed, 0, len(h.claimed))
	for _, m := range h.claimed {
		if m.state != StateSkippedOptOut {
			send = append(send, m)
		}
	}
	if h.skipped > 0 {
		e.m.messages.WithLabelValues(string(e.lane), string(StateSkippedOptOut)).Add(float64(h.skipped))
	}
	e.unhand(h.reserved - len(send))
	if len(send) == 0 {
		return
	}
	e.m.claimSize.WithLabelValues(string(e.lane)).Observe(float64(len(h.claimed)))
	e.adopt(h.acct, send)
}

// adopt queues messages claimed by a hand-off for their account's lane
// worker, which sends them before it claims more (takeHanded), in the
// chunks and at the pace of its claims.
func (e *engine) adopt(acct catalog.MessagingAccount, msgs []claimed) {
	e.mu.Lock()
	running := e.runCtx != nil && e.runCtx.Err() == nil
	if running {
		e.pending[acct.ID] = append(e.pending[acct.ID], msgs...)
	}
	e.mu.Unlock()
	if !running {
		// Stopped between the reservation and the commit (Run expands
		// before it stops the engine, so only a misuse): the recorder may
		// be gone, so the claims are left to the lease, like a dead
		// dispatcher's.
		e.log.Warn("engine stopped before a hand-off: its claims go back to the queue after the lease",
			zap.Int("messages", len(msgs)))
		e.unhand(len(msgs))
		return
	}
	e.wake(acct.ID)
}

// takeHanded takes up to n of an account's handed-off messages (took says
// whether there were any). Those of a batch cancelled since they were
// claimed go back to the queue instead, where the recorder's flush cancels
// them (CompleteBatches): a batch's cancellation is read again before more
// than want of its messages (a claim's worth) are taken, so a cancel stops
// every handed-off message but those, as it stops every queued one.
func (e *engine) takeHanded(ctx context.Context, accountID int64, n, want int) (msgs []claimed, took bool, err error) {
	e.mu.Lock()
	q := e.pending[accountID]
	k := min(n, len(q))
	if k == 0 {
		delete(e.checked, accountID)
		e.mu.Unlock()
		return nil, false, nil
	}
	out := append([]claimed(nil), q[:k]...)
	if k == len(q) {
		delete(e.pending, accountID)
	} else {
		e.pending[accountID] = q[k:]
	}
	e.handed -= k
	last := e.checked[accountID]
	e.mu.Unlock()

	// The batches to read: each but the one read last, unless fewer than
	// want of its messages were taken since.
	var ids []string
	counts := map[string]int{}
	for _, m := range out {
		if counts[m.batchID] == 0 {
			ids = append(ids, m.batchID)
		}
		counts[m.batchID]++
	}
	if len(ids) == 1 && ids[0] == last.batchID && last.taken+len(out) <= want {
		e.mu.Lock()
		e.checked[accountID] = checkedBatch{batchID: last.batchID, taken: last.taken + len(out)}
		e.mu.Unlock()
		return out, true, nil
	}
	rows, err := e.pool.Query(ctx, `SELECT id::text FROM batches WHERE id = ANY($1::uuid[]) AND cancelled_at IS NOT NULL`, ids)
	var cancelled []string
	if err == nil {
		cancelled, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		// Back in line: the next step takes them again.
		e.mu.Lock()
		e.pending[accountID] = append(out, e.pending[accountID]...)
		e.handed += len(out)
		e.mu.Unlock()
		return nil, false, fmt.Errorf("cancelled batches of handed-off messages: %w", err)
	}
	tail := out[len(out)-1].batchID
	e.mu.Lock()
	e.checked[accountID] = checkedBatch{batchID: tail, taken: counts[tail]}
	e.mu.Unlock()
	if len(cancelled) == 0 {
		return out, true, nil
	}
	var keep, back []claimed
	for _, m := range out {
		if slices.Contains(cancelled, m.batchID) {
			back = append(back, m)
		} else {
			keep = append(keep, m)
		}
	}
	e.unsent(back...)
	return keep, true, nil
}

// checkedBatch is the batch whose cancellation an account's lane worker
// read last, and how many of its handed-off messages it took since.
type checkedBatch struct {
	batchID string
	taken   int
}

// giveBack returns the handed-off messages of an account (every account's
// when accountID is 0) to the queue unsent, no attempt spent: its delivery
// hours closed, or the engine is stopping.
func (e *engine) giveBack(accountID int64) {
	e.mu.Lock()
	var back []claimed
	for id, q := range e.pending {
		if accountID == 0 || id == accountID {
			back = append(back, q...)
			delete(e.pending, id)
		}
	}
	e.handed -= len(back)
	e.mu.Unlock()
	e.unsent(back...)
}
