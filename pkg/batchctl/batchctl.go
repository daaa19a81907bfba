// Package batchctl is what a company can do to a send batch once it was
// accepted: cancel what has not reached the provider yet (Cancel), and list
// its messages with their outcomes (Messages). It needs only a PostgreSQL
// pool, so that the gateway's public API and the admin console share it.
//
// # Cancelling
//
// Cancel moves every queued, scheduled and deferred message of the batch to
// cancelled, a terminal state, in one transaction that holds the batch's row
// lock and updates only rows still in those states. A dispatcher's claim
// (pkg/delivery) locks the rows it takes and turns them into sending in one
// statement, skipping locked rows: whichever of the two locks a row first
// wins, and the other sees the new state and leaves it. So no message is
// both cancelled and sent. Messages already sending (or later) are left to
// finish; one that comes back to the queue afterwards (a retryable error, a
// released claim) is cancelled when that is recorded (see
// delivery.CompleteBatches).
//
// A batch that waits in the stream has no record yet: CancelPending records
// it, from what the stream holds, with status cancelled, and the dispatcher
// that expands it later creates its messages cancelled.
//
// A batch none of whose messages the provider accepted ends cancelled; one
// cancelled after some were sent ends completed, with a cancelled count.
package batchctl

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/pkg/batchview"
	"github.com/parleyhq/parley/pkg/delivery"
	"github.com/parleyhq/parley/pkg/events"
)

// ErrNotFound is a batch that does not exist for the asking company (or an
// id that is not a batch id). It is batchview.ErrNotFound.
var ErrNotFound = batchview.ErrNotFound

// Result is what a cancel did: how many messages it cancelled (0 when there
// was nothing left to cancel, as on a second cancel) and the batch after it.
type Result struct {
	Cancelled int
	batchview.Batch
}

// attempts bounds the retries of a cancel chosen as a deadlock victim
// (a recorder may lock a message, then the batch, in the other order).
const attempts = 5

// Cancel cancels the company's batch now; see CancelAt.
func Cancel(ctx context.Context, db *pgxpool.Pool, companyID int64, batchID string) (Result, error) {
	return CancelAt(ctx, db, companyID, batchID, time.Now())
}

// CancelAt cancels every message of the company's recorded batch that was
// not handed to the provider yet, recording now as the time. ErrNotFound
// when the company has no such recorded batch (it may still wait in the
// stream: see CancelPending).
func CancelAt(ctx context.Context, db *pgxpool.Pool, companyID int64, batchID string, now time.Time) (Result, error) {
	id, err := uuid.Parse(batchID)
	if err != nil {
		return Result{}, fmt.Errorf("batch %q: %w", batchID, ErrNotFound)
	}
	return retry(ctx, db, func(tx pgx.Tx) (Result, error) {
		return cancelRecorded(ctx, tx, companyID, id.String(), now)
	})
}

// CancelPending cancels a batch found in the stream before any dispatcher
// recorded it (pending as the stream describes it: id, company, kind,
// source, contact count, accepted and scheduled times). It records the batch
// as cancelled, so that its expansion creates its messages cancelled, and
// counts all its contacts as cancelled. When a dispatcher recorded the batch
// meanwhile, it is cancelled as a recorded one.
func CancelPending(ctx context.Context, db *pgxpool.Pool, pending batchview.Batch, now time.Time) (Result, error) {
	id, err := uuid.Parse(pending.ID)
	if err != nil || pending.CompanyID <= 0 {
		return Result{}, fmt.Errorf("batch %q: %w", pending.ID, ErrNotFound)
	}
	return retry(ctx, db, func(tx pgx.Tx) (Result, error) {
		tag, err := tx.Exec(ctx, `
			INSERT INTO batches (id, company_id, kind, source, contact_count, is_forced, scheduled_at, status,
				accepted_at, created_at, cancelled_at, completed_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, 'cancelled', $8, $9, $9, $9)
			ON CONFLICT (id) DO NOTHING`,
			id, pending.CompanyID, pending.Kind, pending.Source, pending.ContactCount, pending.IsForced,
			pending.ScheduledAt, pending.AcceptedAt, now)
		if err != nil {
			return Result{}, fmt.Errorf("record cancelled batch %s: %w", id, err)
		}
		if tag.RowsAffected() == 0 {
			return cancelRecorded(ctx, tx, pending.CompanyID, id.String(), now)
		}
		b, err := batchview.BatchStatus(ctx, tx, pending.CompanyID, id.String())
		if err != nil {
			return Result{}, err
		}
		if err := appendCancelled(ctx, tx, b, now); err != nil {
			return Result{}, err
		}
		return Result{Cancelled: pending.ContactCount, Batch: b}, nil
	})
}

// cancelRecorded is the cancel of a recorded batch, in tx.
func cancelRecorded(ctx context.Context, tx pgx.Tx, companyID int64, id string, now time.Time) (Result, error) {
	var status string
	var cancelledAt *time.Time
	err := tx.QueryRow(ctx, `SELECT status::text, cancelled_at FROM batches WHERE id = $1 AND company_id = $2 FOR UPDATE`,
		id, companyID).Scan(&status, &cancelledAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Result{}, fmt.Errorf("batch %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Result{}, fmt.Errorf("lock batch %s: %w", id, err)
	}
	tag, err := tx.Exec(ctx, `
		UPDATE messages SET state = 'cancelled', cancelled_at = $2, updated_at = $2
		WHERE batch_id = $1 AND state IN ('queued', 'scheduled', 'deferred')`, id, now)
	if err != nil {
		return Result{}, fmt.Errorf("cancel messages of batch %s: %w", id, err)
	}
	n := int(tag.RowsAffected())
	// A batch that can still send is marked, so that what comes back to its
	// queue is cancelled too; a finished one (completed, failed) only is
	// when this cancel found something, which it cannot.
	first := cancelledAt == nil && (n > 0 || status == string(batchview.BatchScheduled) || status == string(batchview.BatchProcessing))
	if first {
		if _, err := tx.Exec(ctx, `UPDATE batches SET cancelled_at = $2 WHERE id = $1`, id, now); err != nil {
			return Result{}, fmt.Errorf("mark batch %s cancelled: %w", id, err)
		}
		if err := delivery.CompleteBatches(ctx, tx, []string{id}, now); err != nil {
			return Result{}, err
		}
	}
	b, err := batchview.BatchStatus(ctx, tx, companyID, id)
	if err != nil {
		return Result{}, err
	}
	if first {
		if err := appendCancelled(ctx, tx, b, now); err != nil {
			return Result{}, err
		}
	}
	return Result{Cancelled: n, Batch: b}, nil
}

// appendCancelled records the batch.cancelled event of the first cancel.
func appendCancelled(ctx context.Context, tx pgx.Tx, b batchview.Batch, now time.Time) error {
	counts := make(map[string]int, len(b.Counts))
	for s, n := range b.Counts {
		counts[string(s)] = n
	}
	return events.Append(ctx, tx, events.Event{CompanyID: b.CompanyID, Type: events.BatchCancelled, At: now,
		Data: events.Batch{BatchID: b.ID, Kind: string(b.Kind), Status: string(b.Status), Counts: counts, ChangedAt: now}})
}

// retry runs fn in a transaction, again when PostgreSQL chose it as a
// deadlock victim or refused it for serialization.
func retry(ctx context.Context, db *pgxpool.Pool, fn func(pgx.Tx) (Result, error)) (Result, error) {
	var res Result
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
	return Result{}, err
}

// Listing limits.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Filter selects the messages of a batch to list.
type Filter struct {
	// States keeps the messages in one of these states (message_state
	// names); empty keeps all.
	States []string
	// Limit is the page size, 1 to MaxLimit; 0 is DefaultLimit.
	Limit int
	// Cursor is a page's NextCursor, "" for the first page.
	Cursor string
}

// InvalidError is a filter that cannot be used; Field is states, limit or
// cursor.
type InvalidError struct {
	Field string
	Msg   string
	Input any
}

func (e *InvalidError) Error() string { return e.Field + ": " + e.Msg }

// Times are when a message entered each state it has been in (the last
// time, for a state entered more than once). Created is when it was
// queued or scheduled.
type Times struct {
	Created       time.Time  `json:"created"`
	Deferred      *time.Time `json:"deferred,omitempty"`
	Sending       *time.Time `json:"sending,omitempty"`
	Sent          *time.Time `json:"sent,omitempty"`
	Delivered     *time.Time `json:"delivered,omitempty"`
	Read          *time.Time `json:"read,omitempty"`
	Failed        *time.Time `json:"failed,omitempty"`
	SkippedOptOut *time.Time `json:"skipped_opt_out,omitempty"`
	Cancelled     *time.Time `json:"cancelled,omitempty"`
	// Updated is the last change of the message.
	Updated time.Time `json:"updated"`
}

// Message is one message of a batch with its outcome.
type Message struct {
	ID int64 `json:"message_id"`
	// Seq is the message's position in the batch, from 0.
	Seq               int             `json:"seq"`
	Phone             string          `json:"phone"`
	State             batchview.State `json:"state"`
	ProviderMessageID *string         `json:"provider_message_id"`
	ErrorCode         *int            `json:"error_code"`
	ErrorTitle        *string         `json:"error_title"`
	// Attempts is how many times it was handed to the provider.
	Attempts int `json:"attempts"`
	// Due is when a waiting message (queued, scheduled, deferred) may go.
	Due   *time.Time `json:"due,omitempty"`
	Times Times      `json:"times"`
}

// Page is one page of a batch's messages, in batch order.
type Page struct {
	BatchID  string    `json:"batch_id"`
	Messages []Message `json:"messages"`
	// NextCursor continues after the last message; nil on the last page.
	NextCursor *string `json:"next_cursor"`
}

// parseFilter checks a filter and returns its states, limit and the
// position after which the page starts (-1 for the first page).
func parseFilter(batchID string, f Filter) (states []string, limit, after int, err error) {
	seen := map[string]bool{}
	for _, s := range f.States {
		if !validState(s) {
			return nil, 0, 0, &InvalidError{Field: "state", Input: s,
				Msg: "state must be one of " + strings.Join(stateNames(), ", ")}
		}
		if !seen[s] {
			seen[s] = true
			states = append(states, s)
		}
	}
	limit = f.Limit
	if limit == 0 {
		limit = DefaultLimit
	}
	if limit < 1 || limit > MaxLimit {
		return nil, 0, 0, &InvalidError{Field: "limit", Input: f.Limit,
			Msg: fmt.Sprintf("limit must be between 1 and %d", MaxLimit)}
	}
	after = -1
	if f.Cursor != "" {
		after, err = decodeCursor(batchID, f.Cursor)
		if err != nil {
			return nil, 0, 0, err
		}
	}
	return states, limit, after, nil
}

func validState(s string) bool {
	for _, x := range batchview.States {
		if string(x) == s {
			return true
		}
	}
	return false
}

func stateNames() []string {
	out := make([]string, len(batchview.States))
	for i, s := range batchview.States {
		out[i] = string(s)
	}
	return out
}

// A cursor is the batch and the position of the last message listed: the
// position never changes, so a page follows the one before it whatever
// states changed between them (a message that changed state may leave or
// join the filter, but none is listed twice and none that matches
// throughout is skipped).
func encodeCursor(batchID string, seq int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("v1:" + batchID + ":" + strconv.Itoa(seq)))
}

func decodeCursor(batchID, c string) (int, error) {
	bad := &InvalidError{Field: "cursor", Input: c, Msg: "cursor is not one this batch's listing gave"}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, bad
	}
	parts := strings.Split(string(raw), ":")
	if len(parts) != 3 || parts[0] != "v1" || parts[1] != batchID {
		return 0, bad
	}
	seq, err := strconv.Atoi(parts[2])
	if err != nil || seq < 0 || strconv.Itoa(seq) != parts[2] {
		return 0, bad
	}
	return seq, nil
}

// Messages lists a page of the company's batch's messages, in batch order,
// with their outcomes. ErrNotFound when the company has no such recorded
// batch (one still in the stream has no messages yet); an *InvalidError
// for a filter that cannot be used.
func Messages(ctx context.Context, db *pgxpool.Pool, companyID int64, batchID string, f Filter) (Page, error) {
	id, err := uuid.Parse(batchID)
	if err != nil {
		return Page{}, fmt.Errorf("batch %q: %w", batchID, ErrNotFound)
	}
	batchID = id.String()
	states, limit, after, err := parseFilter(batchID, f)
	if err != nil {
		return Page{}, err
	}
	var ok bool
	if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM batches WHERE id = $1 AND company_id = $2)`,
		batchID, companyID).Scan(&ok); err != nil {
		return Page{}, fmt.Errorf("find batch %s: %w", batchID, err)
	}
	if !ok {
		return Page{}, fmt.Errorf("batch %s: %w", batchID, ErrNotFound)
	}
	rows, err := db.Query(ctx, `
		SELECT id, seq, phone, state::text, provider_message_id, error_code, error_title, attempts,
			CASE WHEN state IN ('queued', 'scheduled', 'deferred') THEN not_before END,
			created_at, deferred_at, CASE WHEN state <> 'skipped_opt_out' THEN claimed_at END, sent_at, delivered_at, read_at, failed_at, skipped_at, cancelled_at, updated_at
		FROM messages
		WHERE batch_id = $1 AND seq > $2 AND (COALESCE(cardinality($3::text[]), 0) = 0 OR state::text = ANY($3::text[]))
		ORDER BY seq
		LIMIT $4`, batchID, after, states, limit+1)
	if err != nil {
		return Page{}, fmt.Errorf("list messages of batch %s: %w", batchID, err)
	}
	msgs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Message, error) {
		var m Message
		var state string
		err := r.Scan(&m.ID, &m.Seq, &m.Phone, &state, &m.ProviderMessageID, &m.ErrorCode, &m.ErrorTitle, &m.Attempts,
			&m.Due, &m.Times.Created, &m.Times.Deferred, &m.Times.Sending, &m.Times.Sent, &m.Times.Delivered,
			&m.Times.Read, &m.Times.Failed, &m.Times.SkippedOptOut, &m.Times.Cancelled, &m.Times.Updated)
		m.State = batchview.State(state)
		return m, err
	})
	if err != nil {
		return Page{}, fmt.Errorf("list messages of batch %s: %w", batchID, err)
	}
	p := Page{BatchID: batchID, Messages: msgs}
	if len(msgs) > limit {
		p.Messages = msgs[:limit]
		next := encodeCursor(batchID, p.Messages[limit-1].Seq)
		p.NextCursor = &next
	}
	if p.Messages == nil {
		p.Messages = []Message{}
	}
	return p, nil
}
