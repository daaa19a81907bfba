package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/pkg/bus"
)

// Found is one message looked up by its id or its wamid, with its batch.
type Found struct {
	Message
	// Direction is "outbound": Parley sent it.
	Direction string        `json:"direction"`
	BatchID   string        `json:"batch_id"`
	Kind      bus.BatchKind `json:"kind"`
	Lane      Lane          `json:"lane"`
	// Content is a reply's session message (text, media, interactive,
	// reaction) in the Cloud API's wire format; absent for a template.
	Content json.RawMessage `json:"content,omitempty"`
}

// messageSelect reads a message as Messages lists it, with its batch.
const messageSelect = `
	SELECT m.id, m.seq, m.phone, m.state::text, m.provider_message_id, m.error_code, m.error_title, m.attempts,
		CASE WHEN m.state IN ('queued', 'scheduled', 'deferred') OR (m.state = 'held' AND m.hold_reason = 'messaging_limit') THEN m.not_before END,
		m.created_at, m.deferred_at, CASE WHEN m.state <> 'skipped_opt_out' THEN m.claimed_at END, m.sent_at,
		m.delivered_at, m.read_at, m.failed_at, m.skipped_at, m.cancelled_at, m.replied_at, m.updated_at,
		m.billable, m.pricing_category, m.pricing_model, m.held_at, m.hold_reason`

// scanMessage scans messageSelect's columns, then extra.
func scanMessage(row pgx.Row, extra ...any) (Message, error) {
	var m Message
	var state string
	var billable *bool
	var category, model *string
	err := row.Scan(append([]any{&m.ID, &m.Seq, &m.Phone, &state, &m.ProviderMessageID, &m.ErrorCode, &m.ErrorTitle, &m.Attempts,
		&m.Due, &m.Times.Created, &m.Times.Deferred, &m.Times.Sending, &m.Times.Sent, &m.Times.Delivered,
		&m.Times.Read, &m.Times.Failed, &m.Times.SkippedOptOut, &m.Times.Cancelled, &m.Times.Replied, &m.Times.Updated,
		&billable, &category, &model, &m.Times.Held, &m.HoldReason}, extra...)...)
	m.State = State(state)
	if category != nil {
		m.Pricing = &Pricing{Billable: billable != nil && *billable, Category: *category}
		if model != nil {
			m.Pricing.Model = *model
		}
	}
	return m, err
}

// MessageByID finds the company's message by its id; another company's, or
// none, is ErrNotFound.
func MessageByID(ctx context.Context, db DB, companyID, id int64) (Found, error) {
	return findMessage(ctx, db, `m.id = $1 AND m.company_id = $2`, id, companyID)
}

// MessageByWamid finds the company's message by the id WhatsApp gave it
// when it accepted it (the wamid status callbacks carry); another
// company's, or none, is ErrNotFound.
func MessageByWamid(ctx context.Context, db DB, companyID int64, wamid string) (Found, error) {
	return findMessage(ctx, db, `m.provider_message_id = $1 AND m.company_id = $2`, wamid, companyID)
}

// foundSelect reads a message with its batch.
const foundSelect = messageSelect + `, m.batch_id::text, b.kind::text, m.lane::text, m.content
	FROM messages m JOIN batches b ON b.id = m.batch_id`

func scanFound(row pgx.Row) (Found, error) {
	f := Found{Direction: DirectionOutbound}
	var lane string
	var content []byte
	m, err := scanMessage(row, &f.BatchID, &f.Kind, &lane, &content)
	f.Message, f.Lane = m, Lane(lane)
	if len(content) > 0 {
		f.Content = content
	}
	return f, err
}

func findMessage(ctx context.Context, db DB, where string, key any, companyID int64) (Found, error) {
	f, err := scanFound(db.QueryRow(ctx, foundSelect+` WHERE `+where, key, companyID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Found{}, fmt.Errorf("message %v: %w", key, ErrNotFound)
	}
	if err != nil {
		return Found{}, fmt.Errorf("find message %v: %w", key, err)
	}
	return f, nil
}

// A number's listing limits.
const (
	DefaultPhoneLimit = 50
	MaxPhoneLimit     = 100
)

// PhoneFilter pages the messages to one number.
type PhoneFilter struct {
	// Limit is the page size, 1 to MaxPhoneLimit; 0 is DefaultPhoneLimit.
	Limit int
	// Cursor is a page's NextCursor, "" for the first page.
	Cursor string
}

// PhonePage is a page of a conversation with one number: the messages
// Parley sent to it (each with its batch) and the messages it sent to the
// company's numbers, newest first.
type PhonePage struct {
	Phone    string  `json:"phone"`
	Messages []Entry `json:"messages"`
	// NextCursor continues after the last message; nil on the last page.
	NextCursor *string `json:"next_cursor"`
}

// PhoneMessages lists a page of the company's conversation with phone
// (E.164 with its +): the messages sent to it from every batch and the
// messages it sent, newest first (by id: one sequence numbers both).
// ErrNotFound when the company never sent to that number, never heard from
// it and has no contact of it; an *InvalidError for a filter that cannot be
// used.
func PhoneMessages(ctx context.Context, db DB, companyID int64, phone string, f PhoneFilter) (PhonePage, error) {
	limit, err := pageSize(f.Limit, DefaultPhoneLimit, MaxPhoneLimit)
	if err != nil {
		return PhonePage{}, err
	}
	var after int64
	if f.Cursor != "" {
		var ok bool
		if after, ok = cursorInt("phone:"+phone, f.Cursor, 1); !ok {
			return PhonePage{}, &InvalidError{Field: "cursor", Input: f.Cursor, Msg: "cursor is not one this listing gave"}
		}
	}
	rows, err := db.Query(ctx, foundSelect+`
		WHERE m.company_id = $1 AND m.phone = $2 AND ($3::bigint = 0 OR m.id < $3)
		ORDER BY m.id DESC
		LIMIT $4`, companyID, phone, after, limit+1)
	if err != nil {
		return PhonePage{}, fmt.Errorf("list messages to %s: %w", phone, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Found, error) { return scanFound(r) })
	if err != nil {
		return PhonePage{}, fmt.Errorf("list messages to %s: %w", phone, err)
	}
	rows, err = db.Query(ctx, fmt.Sprintf(inboundSelect, "")+`
		WHERE i.company_id = $1 AND i.phone = $2 AND ($3::bigint = 0 OR i.id < $3)
		ORDER BY i.id DESC
		LIMIT $4`, companyID, phone, after, limit+1)
	if err != nil {
		return PhonePage{}, fmt.Errorf("list messages from %s: %w", phone, err)
	}
	in, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Inbound, error) { return scanInbound(r) })
	if err != nil {
		return PhonePage{}, fmt.Errorf("list messages from %s: %w", phone, err)
	}
	msgs := make([]Entry, 0, len(out)+len(in))
	for i, j := 0, 0; i < len(out) || j < len(in); {
		if j == len(in) || i < len(out) && out[i].ID > in[j].ID {
			msgs = append(msgs, Entry{Out: &out[i]})
			i++
			continue
		}
		msgs = append(msgs, Entry{In: &in[j]})
		j++
	}
	if len(msgs) == 0 && f.Cursor == "" {
		// No message either way: the number must be the company's contact
		// (one who only joined a segment).
		var known bool
		if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM contacts WHERE company_id = $1 AND phone = $2)`,
			companyID, phone).Scan(&known); err != nil {
			return PhonePage{}, fmt.Errorf("find contact %s: %w", phone, err)
		}
		if !known {
			return PhonePage{}, fmt.Errorf("contact %s: %w", phone, ErrNotFound)
		}
	}
	p := PhonePage{Phone: phone, Messages: msgs}
	if len(msgs) > limit {
		p.Messages = msgs[:limit]
		next := encodeCursor("phone:"+phone, strconv.FormatInt(p.Messages[limit-1].ID(), 10))
		p.NextCursor = &next
	}
	return p, nil
}
