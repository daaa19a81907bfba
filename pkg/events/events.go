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
)

// Types lists every event type an endpoint can subscribe to.
var Types = []Type{MessageSent, MessageDelivered, MessageRead, MessageFailed, MessageSkipped,
	BatchCompleted, BatchFailed, BatchCancelled, ContactOptedOut, ContactOptedIn}

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
	State             string    `json:"state"`
	ProviderMessageID string    `json:"provider_message_id,omitempty"`
	Error             *Error    `json:"error,omitempty"`
	ChangedAt         time.Time `json:"changed_at"`
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

// Execer is a transaction, a connection or a pool: what Append writes with.
// Pass the transaction that makes the change.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

const appendSQL = `
INSERT INTO event_outbox (id, company_id, type, occurred_at, data)
SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::timestamptz[], $5::jsonb[])`

// Append records evs in the outbox with db, in one statement. Call it with
// the transaction that commits the change the events describe.
func Append(ctx context.Context, db Execer, evs ...Event) error {
	if len(evs) == 0 {
		return nil
	}
	ids := make([]string, len(evs))
	companies := make([]int64, len(evs))
	types := make([]string, len(evs))
	ats := make([]time.Time, len(evs))
	data := make([]string, len(evs))
	for i, e := range evs {
		if !e.Type.Valid() {
			return fmt.Errorf("append event: unknown type %q", e.Type)
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
		ids[i], companies[i], types[i], ats[i], data[i] = id, e.CompanyID, string(e.Type), e.At, string(b)
	}
	if _, err := db.Exec(ctx, appendSQL, ids, companies, types, ats, data); err != nil {
		return fmt.Errorf("append %d events: %w", len(evs), err)
	}
	return nil
}
