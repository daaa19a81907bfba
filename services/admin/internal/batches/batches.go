// Package batches reads a company's batches for the console's Sends pages:
// the recent batches with their messages counted by state, one batch's
// states over time, and its failed and skipped messages.
package batches

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/record"
)

// ErrNotFound is a batch that does not exist for the company (or an id
// that is not a batch id at all).
var ErrNotFound = record.ErrNotFound

// StateCancelled is the terminal state of a message cancelled before it
// reached the provider.
const StateCancelled = string(record.StateCancelled)

// States are every message state in display order.
var States = func() []string {
	out := make([]string, len(record.States))
	for i, st := range record.States {
		out[i] = string(st)
	}
	return out
}()

// waitingStates are the states of a message not yet handed to the provider:
// what a cancel still stops.
var waitingStates = func() map[string]bool {
	out := map[string]bool{}
	for _, st := range record.Cancellable {
		out[string(st)] = true
	}
	return out
}()

// Waiting reports whether a message in state st is not yet handed to the
// provider, so that a cancel would stop it.
func Waiting(st string) bool { return waitingStates[st] }

// Store reads batches.
type Store struct {
	db  *pgxpool.Pool
	now func() time.Time
}

// New returns a Store on pool; now is the clock that ends the timeline of a
// batch still under way.
func New(pool *pgxpool.Pool, now func() time.Time) *Store { return &Store{db: pool, now: now} }

// Batch is one batch as the Sends list shows it.
type Batch struct {
	ID   string
	Kind string
	// Name is the campaign's or automation's name, "" for neither.
	Name string
	// CampaignID and AutomationID are what the batch sends (nil for
	// neither); SegmentID and SegmentName whom a campaign went to.
	CampaignID   *int64
	AutomationID *int64
	SegmentID    *int64
	SegmentName  string
	Source       string
	Status       string
	Error        string
	ContactCount int
	IsForced     bool
	AcceptedAt   time.Time
	ScheduledAt  *time.Time
	CompletedAt  *time.Time
	CancelledAt  *time.Time
	// Counts has the messages by state, only the states that have some.
	Counts map[string]int
}

// Total is the number of messages, or the contact count while the batch is
// not expanded yet.
func (b Batch) Total() int {
	n := 0
	for _, c := range b.Counts {
		n += c
	}
	if n == 0 {
		return b.ContactCount
	}
	return n
}

// Unfinished reports whether the batch may still send something.
func (b Batch) Unfinished() bool {
	switch b.Status {
	case string(record.BatchAccepted), string(record.BatchScheduled), string(record.BatchProcessing):
		return true
	}
	return false
}

// Cancellable reports whether a cancel would still stop something: the batch
// is not expanded yet, or some of its messages are not handed to the
// provider.
func (b Batch) Cancellable() bool {
	if !b.Unfinished() {
		return false
	}
	if b.Status == string(record.BatchAccepted) || b.Status == string(record.BatchScheduled) {
		return true
	}
	for s, n := range b.Counts {
		if waitingStates[s] && n > 0 {
			return true
		}
	}
	return false
}

const batchColumns = `b.id::text, b.kind::text,
	COALESCE((SELECT c.name FROM campaigns c WHERE c.id = b.campaign_id), (SELECT a.name FROM automations a WHERE a.id = b.automation_id), ''),
	b.campaign_id, b.automation_id, b.segment_id, COALESCE((SELECT s.name FROM segments s WHERE s.id = b.segment_id), ''),
	b.source, b.status::text, COALESCE(b.error, ''), b.contact_count, b.is_forced,
	b.accepted_at, b.scheduled_at, b.completed_at, b.cancelled_at,
	COALESCE((SELECT jsonb_object_agg(s, n) FROM (SELECT m.state::text AS s, count(*) AS n FROM messages m
		WHERE m.batch_id = b.id GROUP BY m.state) c), '{}'::jsonb)`

func scanBatch(row pgx.Row) (Batch, error) {
	var b Batch
	err := row.Scan(&b.ID, &b.Kind, &b.Name, &b.CampaignID, &b.AutomationID, &b.SegmentID, &b.SegmentName, &b.Source, &b.Status, &b.Error, &b.ContactCount, &b.IsForced,
		&b.AcceptedAt, &b.ScheduledAt, &b.CompletedAt, &b.CancelledAt, &b.Counts)
	b.Source = string(bus.ParseSource(b.Source)) // a legacy spelling reads as the canonical one
	return b, err
}

// Recent returns up to limit of the company's batches, newest first, older
// than the batch before (all when before is ""). more says whether older
// batches remain. Replies (kind reply: one message answering a contact)
// are not sends a marketer follows here: the Conversations page shows them.
func (s *Store) Recent(ctx context.Context, companyID int64, before string, limit int) (batches []Batch, more bool, err error) {
	var beforeID *uuid.UUID
	if before != "" {
		id, err := uuid.Parse(before)
		if err != nil {
			return nil, false, fmt.Errorf("before %q: %w", before, ErrNotFound)
		}
		beforeID = &id
	}
	rows, err := s.db.Query(ctx, `SELECT `+batchColumns+` FROM batches b
		WHERE b.company_id = $1 AND ($2::uuid IS NULL OR b.id < $2::uuid) AND b.kind <> 'reply'
		ORDER BY b.id DESC LIMIT $3`, companyID, beforeID, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("list batches: %w", err)
	}
	batches, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Batch, error) { return scanBatch(r) })
	if err != nil {
		return nil, false, fmt.Errorf("list batches: %w", err)
	}
	if len(batches) > limit {
		return batches[:limit], true, nil
	}
	return batches, false, nil
}

// Get returns one of the company's batches.
func (s *Store) Get(ctx context.Context, companyID int64, batchID string) (Batch, error) {
	id, err := uuid.Parse(batchID)
	if err != nil {
		return Batch{}, fmt.Errorf("batch %q: %w", batchID, ErrNotFound)
	}
	b, err := scanBatch(s.db.QueryRow(ctx, `SELECT `+batchColumns+` FROM batches b WHERE b.id = $1 AND b.company_id = $2`, id, companyID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Batch{}, fmt.Errorf("batch %s: %w", batchID, ErrNotFound)
	}
	if err != nil {
		return Batch{}, fmt.Errorf("load batch %s: %w", batchID, err)
	}
	return b, nil
}

// Held says why the batch's held messages wait, by reason
// (record.BatchHeld).
func (s *Store) Held(ctx context.Context, batchID string) ([]record.HeldCount, error) {
	return record.BatchHeld(ctx, s.db, batchID)
}

// Timeline is how many of a batch's messages were in each state at evenly
// spaced moments from Start to End.
type Timeline struct {
	Start, End time.Time
	// At[i] is the moment of point i; Counts[i] the messages by state then.
	At     []time.Time
	Counts []map[string]int
}

// TimelineStates are the states a timeline tells apart: a message is
// "waiting" from its creation until it is sent, failed, skipped or
// cancelled (queued, scheduled, deferred, held and sending have no time of
// their own).
var TimelineStates = []string{"waiting", "sent", "delivered", "read", "failed", "skipped_opt_out", StateCancelled}

// timelineEvents are the state changes of the messages of batch $1: (id,
// at, st, ord), st one of TimelineStates. failed_at, skipped_at and
// cancelled_at count only for a message now in that state (a message whose
// failure a later delivery overrode is not shown failed). The event of a
// message's current state is moved after its other events, and made from
// updated_at when that state has no time, so that the timeline ends on the
// counts the batch has now.
const timelineEvents = `
	WITH cur AS (
		SELECT id, created_at, sent_at, delivered_at, read_at, updated_at,
			CASE WHEN state = 'failed' THEN failed_at END AS failed_at,
			CASE WHEN state = 'skipped_opt_out' THEN skipped_at END AS skipped_at,
			CASE WHEN state::text = 'cancelled' THEN cancelled_at END AS cancelled_at,
			CASE WHEN state IN ('queued', 'scheduled', 'deferred', 'held', 'sending') THEN 'waiting' ELSE state::text END AS st
		FROM messages WHERE batch_id = $1::uuid
	), ev AS (
		SELECT c.id, e.st, e.ord,
			CASE WHEN e.st = c.st
				THEN GREATEST(e.at, c.created_at, c.sent_at, c.delivered_at, c.read_at, c.failed_at, c.skipped_at, c.cancelled_at)
				ELSE e.at END AS at
		FROM cur c CROSS JOIN LATERAL (VALUES
			(c.created_at, 'waiting', 0), (c.sent_at, 'sent', 1), (c.delivered_at, 'delivered', 2), (c.read_at, 'read', 3),
			(c.failed_at, 'failed', 4), (c.skipped_at, 'skipped_opt_out', 4), (c.cancelled_at, 'cancelled', 4),
			(CASE WHEN (CASE c.st WHEN 'waiting' THEN c.created_at WHEN 'sent' THEN c.sent_at WHEN 'delivered' THEN c.delivered_at
				WHEN 'read' THEN c.read_at WHEN 'failed' THEN c.failed_at WHEN 'skipped_opt_out' THEN c.skipped_at
				WHEN 'cancelled' THEN c.cancelled_at END) IS NULL THEN c.updated_at END, c.st, 5)) AS e (at, st, ord)
		WHERE e.at IS NOT NULL
	)
`

// Timeline returns the batch's states over time at points+1 moments, from
// its acceptance to its end (see timelineEnd). Each message's state at a
// moment is the latest of its state times at or before it: created
// (waiting), sent_at, delivered_at, read_at, failed_at, skipped_at,
// cancelled_at (see timelineEvents).
func (s *Store) Timeline(ctx context.Context, b Batch, points int) (Timeline, error) {
	tl := Timeline{Start: b.AcceptedAt}
	var last *time.Time
	err := s.db.QueryRow(ctx, timelineEvents+`SELECT max(at) FROM ev`, b.ID).Scan(&last)
	if err != nil {
		return tl, fmt.Errorf("timeline bounds of batch %s: %w", b.ID, err)
	}
	tl.End = timelineEnd(b, last, s.now(), points)
	if tl.End.Sub(tl.Start) < time.Second {
		// A batch done within a second still gets a readable axis (and a
		// step of whole microseconds).
		tl.End = tl.Start.Add(time.Second)
	}
	step := tl.End.Sub(tl.Start) / time.Duration(points)
	// Each transition of each message is counted in the first point at or
	// after it: +1 to the state entered, -1 to the state left.
	rows, err := s.db.Query(ctx, timelineEvents+`, tr AS (
			SELECT at, st, lag(st) OVER (PARTITION BY id ORDER BY at, ord) AS prev FROM ev
		)
		SELECT LEAST(GREATEST(ceil(extract(epoch FROM at - $2::timestamptz) * 1000000 / $3::float8), 0), $4)::int AS k,
			COALESCE(prev, ''), st, count(*)
		FROM tr WHERE prev IS DISTINCT FROM st GROUP BY 1, 2, 3`,
		b.ID, tl.Start, float64(step.Microseconds()), points)
	if err != nil {
		return tl, fmt.Errorf("timeline of batch %s: %w", b.ID, err)
	}
	delta := make([]map[string]int, points+1)
	for i := range delta {
		delta[i] = map[string]int{}
	}
	for rows.Next() {
		var k, n int
		var prev, st string
		if err := rows.Scan(&k, &prev, &st, &n); err != nil {
			rows.Close()
			return tl, fmt.Errorf("timeline of batch %s: %w", b.ID, err)
		}
		delta[k][st] += n
		if prev != "" {
			delta[k][prev] -= n
		}
	}
	if err := rows.Err(); err != nil {
		return tl, fmt.Errorf("timeline of batch %s: %w", b.ID, err)
	}
	cur := map[string]int{}
	for i := 0; i <= points; i++ {
		for st, n := range delta[i] {
			cur[st] += n
		}
		at := tl.Start.Add(time.Duration(math.Round(float64(step) * float64(i))))
		if i == points {
			at = tl.End
		}
		snap := make(map[string]int, len(cur))
		for st, n := range cur {
			if n != 0 {
				snap[st] = n
			}
		}
		tl.At = append(tl.At, at)
		tl.Counts = append(tl.Counts, snap)
	}
	return tl, nil
}

// timelineEnd is where a batch's chart ends, so that the state it is in
// now is drawn at its true width and not only at the chart's last moment
// (where a batch read in full would look delivered): now while the batch
// is under way; else its end (completed_at, or cancelled_at), or its last
// message change when a receipt came after that (a delivery or a read
// arrives after the batch completed), held for one more step of the chart
// (the last change is then the chart's last moment but one) so that the
// final state has a width; never past now.
func timelineEnd(b Batch, last *time.Time, now time.Time, points int) time.Time {
	end := b.AcceptedAt
	later := func(t *time.Time) {
		if t != nil && t.After(end) {
			end = *t
		}
	}
	later(last)
	if b.Unfinished() {
		later(&now)
		return end
	}
	later(b.CompletedAt)
	later(b.CancelledAt)
	if last != nil && points > 1 && !last.Before(end) {
		hold := last.Add(last.Sub(b.AcceptedAt) / time.Duration(points-1))
		if hold.After(now) {
			hold = now
		}
		later(&hold)
	}
	return end
}

// ProblemStates are the states the batch page lists with their reasons.
var ProblemStates = []string{string(record.StateFailed), string(record.StateSkippedOptOut)}

// Problems returns a page of the batch's failed and skipped messages, in
// the batch's order, from cursor ("" for the first page), through
// record.Messages (the listing GET /api/batches/{id}/messages serves).
func (s *Store) Problems(ctx context.Context, companyID int64, batchID, cursor string, limit int) (record.Page, error) {
	return record.Messages(ctx, s.db, companyID, batchID, record.Filter{States: ProblemStates, Limit: limit, Cursor: cursor})
}

// Cancel cancels every message of the company's batch not yet handed to
// the provider, through record.Cancel (what POST
// /api/batches/{id}/cancel does).
func (s *Store) Cancel(ctx context.Context, companyID int64, batchID string) (record.CancelResult, error) {
	return record.CancelAt(ctx, s.db, companyID, batchID, s.now())
}
