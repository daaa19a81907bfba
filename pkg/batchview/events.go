package batchview

import (
	"context"
	"time"

	"github.com/parleyhq/parley/pkg/events"
)

// Every state change a company can subscribe to writes its event to the
// outbox (pkg/events) with the transaction that makes the change.

// ChangedMessage is a message whose state a statement just changed, as the
// statement's RETURNING gives it.
type ChangedMessage struct {
	ID        int64
	CompanyID int64
	BatchID   string
	Phone     string
	State     State
	Wamid     string
	Code      int
	Title     string
	At        time.Time
}

// messageEventType is the event of a message reaching state s; ok is false
// for states no event announces.
func messageEventType(s State) (events.Type, bool) {
	switch s {
	case StateSent:
		return events.MessageSent, true
	case StateDelivered:
		return events.MessageDelivered, true
	case StateRead:
		return events.MessageRead, true
	case StateFailed:
		return events.MessageFailed, true
	case StateSkippedOptOut:
		return events.MessageSkipped, true
	}
	return "", false
}

// EmitMessages records the events of changed messages with db, the
// transaction that changed them.
func EmitMessages(ctx context.Context, db events.DB, msgs []ChangedMessage) error {
	evs := make([]events.Event, 0, len(msgs))
	for _, m := range msgs {
		t, ok := messageEventType(m.State)
		if !ok {
			continue
		}
		data := events.Message{BatchID: m.BatchID, MessageID: m.ID, Phone: m.Phone, State: string(m.State),
			ProviderMessageID: m.Wamid, ChangedAt: m.At.UTC()}
		if m.State == StateFailed {
			data.Error = &events.Error{Code: m.Code, Title: m.Title}
		}
		evs = append(evs, events.Event{CompanyID: m.CompanyID, Type: t, At: m.At, Data: data})
	}
	return events.Append(ctx, db, evs...)
}
