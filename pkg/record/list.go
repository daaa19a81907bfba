package record

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/pkg/bus"
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
	Created  time.Time  `json:"created"`
	Deferred *time.Time `json:"deferred,omitempty"`
	// Held is when it was last held (HoldReason says why).
	Held          *time.Time `json:"held,omitempty"`
	Sending       *time.Time `json:"sending,omitempty"`
	Sent          *time.Time `json:"sent,omitempty"`
	Delivered     *time.Time `json:"delivered,omitempty"`
	Read          *time.Time `json:"read,omitempty"`
	Failed        *time.Time `json:"failed,omitempty"`
	SkippedOptOut *time.Time `json:"skipped_opt_out,omitempty"`
	Cancelled     *time.Time `json:"cancelled,omitempty"`
	// Replied is when the contact answered it (quoted it, or wrote to the
	// same number within ReplyAttribution).
	Replied *time.Time `json:"replied,omitempty"`
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
	// Due is when a waiting message (queued, scheduled, deferred, or held
	// for the messaging limit) may go.
	Due *time.Time `json:"due,omitempty"`
	// HoldReason is why a held message waits (template_pending,
	// template_paused, messaging_limit); it stays once the message went
	// on, saying what it waited for.
	HoldReason *string `json:"hold_reason,omitempty"`
	Times      Times   `json:"times"`
	// Pricing is how the Cloud API bills it, from its status callbacks;
	// absent until a callback that moved it carried one.
	Pricing *Pricing `json:"pricing,omitempty"`
}

// Pricing is a message's pricing as its status callbacks gave it.
type Pricing struct {
	Billable bool   `json:"billable"`
	Category string `json:"category"`
	Model    string `json:"pricing_model"`
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
		if !slices.Contains(States, State(s)) {
			return nil, 0, 0, &InvalidError{Field: "state", Input: s,
				Msg: "state must be one of " + joinNames(States)}
		}
		if !seen[s] {
			seen[s] = true
			states = append(states, s)
		}
	}
	if limit, err = pageSize(f.Limit, DefaultLimit, MaxLimit); err != nil {
		return nil, 0, 0, err
	}
	after = -1
	if f.Cursor != "" {
		seq, ok := cursorInt(batchID, f.Cursor, 0)
		if !ok {
			return nil, 0, 0, &InvalidError{Field: "cursor", Input: f.Cursor, Msg: "cursor is not one this batch's listing gave"}
		}
		after = int(seq)
	}
	return states, limit, after, nil
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
	rows, err := db.Query(ctx, messageSelect+`
		FROM messages m
		WHERE m.batch_id = $1 AND m.seq > $2 AND (COALESCE(cardinality($3::text[]), 0) = 0 OR m.state::text = ANY($3::text[]))
		ORDER BY m.seq
		LIMIT $4`, batchID, after, states, limit+1)
	if err != nil {
		return Page{}, fmt.Errorf("list messages of batch %s: %w", batchID, err)
	}
	msgs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Message, error) { return scanMessage(r) })
	if err != nil {
		return Page{}, fmt.Errorf("list messages of batch %s: %w", batchID, err)
	}
	p := Page{BatchID: batchID, Messages: msgs}
	if len(msgs) > limit {
		p.Messages = msgs[:limit]
		next := encodeCursor(batchID, strconv.Itoa(p.Messages[limit-1].Seq))
		p.NextCursor = &next
	}
	if p.Messages == nil {
		p.Messages = []Message{}
	}
	return p, nil
}

// Batch listing limits.
const (
	DefaultBatchLimit = 50
	MaxBatchLimit     = 100
)

// BatchFilter selects a company's batches to list; the zero value lists
// them all, newest first, DefaultBatchLimit at a time.
type BatchFilter struct {
	Kind         bus.BatchKind // "" for every kind
	Status       BatchState    // "" for every status
	Source       bus.Source    // "" for every source; a legacy spelling matches its canonical one
	CampaignID   int64         // 0 for any
	AutomationID int64         // 0 for any
	// Since and Until bound accepted_at: Since <= accepted_at < Until.
	Since, Until *time.Time
	// Limit is the page size, 1 to MaxBatchLimit; 0 is DefaultBatchLimit.
	Limit int
	// Cursor is a page's NextCursor, "" for the first page.
	Cursor string
}

// BatchPage is one page of a company's batches, newest first.
type BatchPage struct {
	Batches []Batch
	// NextCursor continues after the last batch; nil on the last page.
	NextCursor *string
}

// check validates the filter and returns its page size and the batch
// after which the page starts ("" for the first page).
func (f BatchFilter) check() (limit int, after string, err error) {
	if f.Kind != "" && !slices.Contains(bus.BatchKinds, f.Kind) {
		return 0, "", &InvalidError{Field: "kind", Input: string(f.Kind), Msg: "kind must be one of " + joinNames(bus.BatchKinds)}
	}
	if f.Status != "" && !slices.Contains(BatchStates, f.Status) {
		return 0, "", &InvalidError{Field: "status", Input: string(f.Status), Msg: "status must be one of " + joinNames(BatchStates)}
	}
	if f.Since != nil && f.Until != nil && !f.Since.Before(*f.Until) {
		return 0, "", &InvalidError{Field: "until", Input: f.Until.Format(time.RFC3339Nano), Msg: "until must be after since"}
	}
	if limit, err = pageSize(f.Limit, DefaultBatchLimit, MaxBatchLimit); err != nil {
		return 0, "", err
	}
	if f.Cursor != "" {
		id, ok := cursorAt("batches", f.Cursor)
		if u, err := uuid.Parse(id); !ok || err != nil || u.String() != id {
			return 0, "", &InvalidError{Field: "cursor", Input: f.Cursor, Msg: "cursor is not one this listing gave"}
		}
		after = id
	}
	return limit, after, nil
}

func joinNames[T ~string](xs []T) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = string(x)
	}
	return strings.Join(out, ", ")
}

// ListBatches lists a page of the company's recorded batches, newest first
// (by id: batch ids are UUIDv7, ordered by when the gateway accepted them),
// without their messages' counts (BatchStatus counts one batch's). A batch
// still in the stream is listed once a dispatcher has recorded it. An
// *InvalidError for a filter that cannot be used.
func ListBatches(ctx context.Context, db DB, companyID int64, f BatchFilter) (BatchPage, error) {
	limit, after, err := f.check()
	if err != nil {
		return BatchPage{}, err
	}
	var sources []string
	if f.Source != "" {
		// Batches recorded before the spellings were fixed match too.
		sources = bus.ParseSource(string(f.Source)).Spellings()
	}
	rows, err := db.Query(ctx, batchSelect+`
		WHERE b.company_id = $1
			AND ($2::uuid IS NULL OR b.id < $2::uuid)
			AND ($3::text = '' OR b.kind::text = $3)
			AND ($4::text = '' OR b.status::text = $4)
			AND ($5::text[] IS NULL OR b.source = ANY($5::text[]))
			AND ($6::bigint = 0 OR b.campaign_id = $6)
			AND ($7::bigint = 0 OR b.automation_id = $7)
			AND ($8::timestamptz IS NULL OR b.accepted_at >= $8)
			AND ($9::timestamptz IS NULL OR b.accepted_at < $9)
		ORDER BY b.id DESC
		LIMIT $10`,
		companyID, optional(after), string(f.Kind), string(f.Status), sources, f.CampaignID, f.AutomationID,
		f.Since, f.Until, limit+1)
	if err != nil {
		return BatchPage{}, fmt.Errorf("list batches of company %d: %w", companyID, err)
	}
	batches, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Batch, error) { return scanBatch(r) })
	if err != nil {
		return BatchPage{}, fmt.Errorf("list batches of company %d: %w", companyID, err)
	}
	p := BatchPage{Batches: batches}
	if len(batches) > limit {
		p.Batches = batches[:limit]
		next := encodeCursor("batches", p.Batches[limit-1].ID)
		p.NextCursor = &next
	}
	if p.Batches == nil {
		p.Batches = []Batch{}
	}
	return p, nil
}
