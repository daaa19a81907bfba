// Package events records what happened to a company's messages, batches and
// contacts, in the same transaction as the change itself (a transactional
// outbox, table event_outbox): an event exists if and only if its change was
// committed, so a crash between the commit and the publish cannot lose one.
// A relay moves outbox rows to the EVENTS stream, from which the webhook
// sender delivers them, at least once, to every endpoint subscribed to them.
//
// Every writer of a state change that a company can subscribe to calls
// Append with the transaction (or single statement's connection) that makes
// the change.
package events

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Type is an event type, as sent in the body's "type" and chosen by
// endpoints' subscriptions.
type Type string

// The event types.
const (
	MessageSent      Type = "message.sent"
	MessageDelivered Type = "message.delivered"
	MessageRead      Type = "message.read"
	// MessageFailed carries the provider's error code and title.
	MessageFailed Type = "message.failed"
	// MessageSkipped is a campaign message not sent because the contact
	// opted out.
	MessageSkipped  Type = "message.skipped"
	BatchCompleted  Type = "batch.completed"
	BatchFailed     Type = "batch.failed"
	BatchCancelled  Type = "batch.cancelled"
	ContactOptedOut Type = "contact.opted_out"
	ContactOptedIn  Type = "contact.opted_in"
	// MessageReceived is a message a contact sent to one of the company's
	// numbers (Received).
	MessageReceived Type = "message.received"
	// TemplateStatusChanged is a template's status at the provider changing
	// (Template): approved, rejected, paused, disabled.
	TemplateStatusChanged Type = "template.status_changed"
	// BatchHeld is some of a batch's messages held (Hold): their template
	// is pending or paused, or the messaging limit has no room.
	BatchHeld Type = "batch.held"
	// BatchReleased is held messages of a batch going again (Hold).
	BatchReleased Type = "batch.released"
)

// Types lists every event type an endpoint can subscribe to.
var Types = []Type{MessageSent, MessageDelivered, MessageRead, MessageFailed, MessageSkipped,
	BatchCompleted, BatchFailed, BatchCancelled, ContactOptedOut, ContactOptedIn, MessageReceived,
	TemplateStatusChanged, BatchHeld, BatchReleased}

// Valid reports whether t is one of Types.
func (t Type) Valid() bool {
	for _, x := range Types {
		if x == t {
			return true
		}
	}
	return false
}

// Event is one change a company may hear about.
type Event struct {
	// ID is the event's id (the webhook-id of its deliveries); Append sets a
	// UUIDv7 when it is empty.
	ID        string
	CompanyID int64
	Type      Type
	// At is when the change happened: the time the record holds for it.
	At time.Time
	// Data is the body's "data": a Message, Batch or Contact.
	Data any
}

// Message is the data of a message.* event.
type Message struct {
	BatchID   string `json:"batch_id"`
	MessageID int64  `json:"message_id"`
	Phone     string `json:"phone"`
	// State is the message's state after the change (sent, delivered, read,
	// failed, skipped_opt_out).
	State             string `json:"state"`
	ProviderMessageID string `json:"provider_message_id,omitempty"`
	Error             *Error `json:"error,omitempty"`
	// Pricing is how WhatsApp bills the message, on the event of the status
	// callback that carried it (delivered, read, failed).
	Pricing   *Pricing  `json:"pricing,omitempty"`
	ChangedAt time.Time `json:"changed_at"`
}

// Pricing is a status callback's pricing: billable, the category and the
// pricing model (PMP: per message).
type Pricing struct {
	Billable bool   `json:"billable"`
	Category string `json:"category"`
	Model    string `json:"pricing_model"`
}

// Error is why a message failed: the provider's code and title, or
// Parley's own code for a failure before the provider (see the README).
type Error struct {
	Code  int    `json:"code,omitempty"`
	Title string `json:"title"`
}

// Batch is the data of a batch.* event.
type Batch struct {
	BatchID string `json:"batch_id"`
	Kind    string `json:"kind"`
	Status  string `json:"status"`
	// Counts is the number of messages in each state, when known.
	Counts    map[string]int `json:"counts,omitempty"`
	Error     string         `json:"error,omitempty"`
	ChangedAt time.Time      `json:"changed_at"`
}

// Template is the data of a template.status_changed event.
type Template struct {
	TemplateID     int64  `json:"template_id"`
	Name           string `json:"name"`
	Language       string `json:"language"`
	Category       string `json:"category"`
	Status         string `json:"status"`
	PreviousStatus string `json:"previous_status"`
	// Reason is a rejection's reason or a pause's explanation.
	Reason string `json:"reason,omitempty"`
	// PausedUntil is when a PAUSED template is expected back.
	PausedUntil *time.Time `json:"paused_until,omitempty"`
	ChangedAt   time.Time  `json:"changed_at"`
}

// Hold is the data of batch.held and batch.released events: how many of
// the batch's messages were held or released, and why.
type Hold struct {
	BatchID string `json:"batch_id"`
	// Reason is template_pending, template_paused or messaging_limit.
	Reason   string `json:"reason"`
	Messages int    `json:"messages"`
	// TemplateID and TemplateName name the template a template hold waits for.
	TemplateID   int64  `json:"template_id,omitempty"`
	TemplateName string `json:"template_name,omitempty"`
	// Until is when a messaging limit hold may go (the earliest of them).
	Until     *time.Time `json:"until,omitempty"`
	ChangedAt time.Time  `json:"changed_at"`
}

// Contact is the data of a contact.* event.
type Contact struct {
	Phone    string `json:"phone"`
	OptedOut bool   `json:"opted_out"`
	// Reason is what changed the consent: keyword, button, provider (error
	// 131050), operator.
	Reason string `json:"reason"`
	// Keyword is the text or button payload that did it, if any.
	Keyword string `json:"keyword,omitempty"`
	// ProviderMessageID is the inbound (or refused outbound) message that
	// caused the change, if any.
	ProviderMessageID string    `json:"provider_message_id,omitempty"`
	ChangedAt         time.Time `json:"changed_at"`
}

// Received is the data of a message.received event: what a contact sent,
// to which of the company's numbers, and the conversation's window.
type Received struct {
	// MessageID is Parley's id of the inbound message (GET /api/messages/{id}).
	MessageID int64 `json:"message_id"`
	// Wamid is the Cloud API's id of the message.
	Wamid       string `json:"wamid"`
	Phone       string `json:"phone"`
	ProfileName string `json:"profile_name,omitempty"`
	// The business number it was sent to.
	MessagingAccountID   int64  `json:"messaging_account_id"`
	MessagingAccountName string `json:"messaging_account_name"`
	Type                 string `json:"type"`
	// Content is {"type": T, T: {...}}: the text, the button or list reply,
	// the media (id, mime_type, sha256, caption), the location, the
	// contacts, the reaction, or the raw type of an unsupported message.
	Content json.RawMessage `json:"content"`
	// Context is the business message this one answers, when it quotes one.
	Context *Context `json:"context,omitempty"`
	// SentAt is when the contact sent it; ReceivedAt when Parley recorded it.
	SentAt     time.Time `json:"sent_at"`
	ReceivedAt time.Time `json:"received_at"`
	// WindowExpiresAt is the end of the 24-hour customer service window
	// with this contact on this number, after this message.
	WindowExpiresAt time.Time `json:"window_expires_at"`
}

// Context is the message an inbound message answers: its wamid, and
// Parley's message and batch when Parley sent it.
type Context struct {
	Wamid     string `json:"wamid"`
	MessageID int64  `json:"message_id,omitempty"`
	BatchID   string `json:"batch_id,omitempty"`
}

// DB is a transaction, a connection or a pool: what Append reads the
// subscriptions and writes the events with. Pass the transaction that makes
// the change.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

const appendSQL = `
INSERT INTO event_outbox (id, company_id, type, occurred_at, data)
SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::timestamptz[], $5::jsonb[])`

// subscriptionsSQL reads, for the companies of the events being appended,
// the event filters of their enabled endpoints: what the fan-out would
// deliver to (an empty filter is every type).
const subscriptionsSQL = `
SELECT company_id, event_types FROM webhook_endpoints WHERE company_id = ANY($1::bigint[]) AND enabled`

// subscriptions is, per company, the event types its enabled endpoints
// receive; all is set for a company with an endpoint that takes every type.
type subscriptions map[int64]*subscription

type subscription struct {
	all   bool
	types map[Type]bool
}

func (s subscriptions) want(e Event) bool {
	c := s[e.CompanyID]
	return c != nil && (c.all || c.types[e.Type])
}

// subscribed reads what the enabled endpoints of evs' companies receive.
func subscribed(ctx context.Context, db DB, evs []Event) (subscriptions, error) {
	seen := make(map[int64]bool, 1)
	ids := make([]int64, 0, 1)
	for _, e := range evs {
		if !seen[e.CompanyID] {
			seen[e.CompanyID] = true
			ids = append(ids, e.CompanyID)
		}
	}
	rows, err := db.Query(ctx, subscriptionsSQL, ids)
	if err != nil {
		return nil, fmt.Errorf("webhook subscriptions: %w", err)
	}
	defer rows.Close()
	subs := subscriptions{}
	for rows.Next() {
		var company int64
		var types []string
		if err := rows.Scan(&company, &types); err != nil {
			return nil, fmt.Errorf("webhook subscriptions: %w", err)
		}
		c := subs[company]
		if c == nil {
			c = &subscription{types: map[Type]bool{}}
			subs[company] = c
		}
		c.all = c.all || len(types) == 0
		for _, t := range types {
			c.types[Type(t)] = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("webhook subscriptions: %w", err)
	}
	return subs, nil
}

// Append records in the outbox, with db, in one statement, the events of
// evs that an enabled webhook endpoint of their company subscribes to. An
// event no endpoint would receive is not written: the fan-out would drop
// it, and a company without webhooks (or that subscribes to batch events
// only) would pay an outbox row, a relay pass and a stream message per
// message for nothing. So an endpoint receives the events of the changes
// whose transaction read the subscriptions after the endpoint was created,
// enabled or subscribed (in practice: committed after it). Call Append with
// the transaction that commits the change the events describe.
func Append(ctx context.Context, db DB, evs ...Event) error {
	if len(evs) == 0 {
		return nil
	}
	for _, e := range evs {
		if !e.Type.Valid() {
			return fmt.Errorf("append event: unknown type %q", e.Type)
		}
	}
	subs, err := subscribed(ctx, db, evs)
	if err != nil {
		return err
	}
	var ids, types, data []string
	var companies []int64
	var ats []time.Time
	for _, e := range evs {
		if !subs.want(e) {
			continue
		}
		id := e.ID
		if id == "" {
			u, err := uuid.NewV7()
			if err != nil {
				return fmt.Errorf("append event: id: %w", err)
			}
			id = u.String()
		}
		b, err := json.Marshal(e.Data)
		if err != nil {
			return fmt.Errorf("append %s event: %w", e.Type, err)
		}
		ids, companies, types, ats, data = append(ids, id), append(companies, e.CompanyID), append(types, string(e.Type)),
			append(ats, e.At), append(data, string(b))
	}
	if len(ids) == 0 {
		return nil
	}
	if _, err := db.Exec(ctx, appendSQL, ids, companies, types, ats, data); err != nil {
		return fmt.Errorf("append %d events: %w", len(ids), err)
	}
	return nil
}

// ErasePhone removes, with db (the erasure's transaction), the company's
// events that name phone and that the relay has not moved to the stream
// yet; it returns how many. An erased contact's pending events are never
// delivered.
func ErasePhone(ctx context.Context, db DB, companyID int64, phone string) (int64, error) {
	t, err := db.Exec(ctx, `DELETE FROM event_outbox WHERE company_id = $1 AND data->>'phone' = $2`, companyID, phone)
	if err != nil {
		return 0, fmt.Errorf("erase the events of a contact: %w", err)
	}
	return t.RowsAffected(), nil
}
