package record

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

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
	Seq               int     `json:"seq"`
	Phone             string  `json:"phone"`
	State             State   `json:"state"`
	ProviderMessageID *string `json:"provider_message_id"`
	ErrorCode         *int    `json:"error_code"`
	ErrorTitle        *string `json:"error_title"`
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
	for _, x := range States {
		if string(x) == s {
			return true
		}
	}
	return false
}

func stateNames() []string {
	out := make([]string, len(States))
	for i, s := range States {
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
		m.State = State(state)
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
