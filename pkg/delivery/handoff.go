package delivery

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/record"
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
	claimed  []record.Claimed
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
	if e == nil || e.lane != record.LaneCampaign || n < 1 {
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
	older, err := record.HasOlderDue(ctx, tx, h.eng.lane, h.acct.ID, now)
	if err != nil {
		return 0, err
	}
	if older {
		return 0, nil
	}
	return h.reserved, nil
}

// insertClaimed creates the batch's messages for phones, the first limit
// of them claimed for the engine (record.InsertClaimedPhoneMessages), and
// keeps the claimed ones; it returns how many messages it created.
func (h *handoff) insertClaimed(ctx context.Context, tx pgx.Tx, m record.NewMessages, phones []string, limit int) (int, error) {
	n, claimed, skipped, err := record.InsertClaimedPhoneMessages(ctx, tx, m, phones, limit)
	if err != nil {
		return 0, err
	}
	h.claimed, h.skipped = claimed, skipped
	return n, nil
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
	send := make([]record.Claimed, 0, len(h.claimed))
	for _, m := range h.claimed {
		if m.State != record.StateSkippedOptOut {
			send = append(send, m)
		}
	}
	if h.skipped > 0 {
		e.m.messages.WithLabelValues(string(e.lane), string(record.StateSkippedOptOut)).Add(float64(h.skipped))
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
func (e *engine) adopt(acct catalog.MessagingAccount, msgs []record.Claimed) {
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
func (e *engine) takeHanded(ctx context.Context, accountID int64, n, want int) (msgs []record.Claimed, took bool, err error) {
	e.mu.Lock()
	q := e.pending[accountID]
	k := min(n, len(q))
	if k == 0 {
		delete(e.checked, accountID)
		e.mu.Unlock()
		return nil, false, nil
	}
	out := append([]record.Claimed(nil), q[:k]...)
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
		if counts[m.BatchID] == 0 {
			ids = append(ids, m.BatchID)
		}
		counts[m.BatchID]++
	}
	if len(ids) == 1 && ids[0] == last.batchID && last.taken+len(out) <= want {
		e.mu.Lock()
		e.checked[accountID] = checkedBatch{batchID: last.batchID, taken: last.taken + len(out)}
		e.mu.Unlock()
		return out, true, nil
	}
	cancelled, err := record.CancelledBatches(ctx, e.pool, ids)
	if err != nil {
		// Back in line: the next step takes them again.
		e.mu.Lock()
		e.pending[accountID] = append(out, e.pending[accountID]...)
		e.handed += len(out)
		e.mu.Unlock()
		return nil, false, fmt.Errorf("cancelled batches of handed-off messages: %w", err)
	}
	tail := out[len(out)-1].BatchID
	e.mu.Lock()
	e.checked[accountID] = checkedBatch{batchID: tail, taken: counts[tail]}
	e.mu.Unlock()
	if len(cancelled) == 0 {
		return out, true, nil
	}
	var keep, back []record.Claimed
	for _, m := range out {
		if slices.Contains(cancelled, m.BatchID) {
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
	var back []record.Claimed
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
