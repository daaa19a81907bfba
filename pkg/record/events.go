package record

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/pkg/events"
)

// Every state change a company can subscribe to writes its event to the
// outbox (pkg/events) with the transaction that makes the change.

// changedMessage is a message whose state a statement just changed, as the
// statement's RETURNING gives it.
type changedMessage struct {
	ID        int64
	CompanyID int64
	BatchID   string
	Phone     string
	State     State
	Wamid     string
	Code      int
	Title     string
	At        time.Time
	// Prior is the state the change moved the message from, where the
	// counters need it (a status callback, a send after a cancel), and
	// PriorAt when it got there (failed_at, cancelled_at).
	Prior   State
	PriorAt time.Time
	// DeliveredAt is when a delivered or read message was delivered, and
	// Unsent whether its send was never recorded (a callback came first).
	DeliveredAt time.Time
	Unsent      bool
	// Billable, Category and Model are how the Cloud API billed it
	// (Category "" when unknown).
	Billable bool
	Category string
	Model    string
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

// emitMessages records the events and the report counters of changed
// messages with db, the transaction that changed them.
func emitMessages(ctx context.Context, db events.DB, msgs []changedMessage) error {
	if err := countMessages(ctx, db, msgs); err != nil {
		return err
	}
	evs := make([]events.Event, 0, len(msgs))
	for _, m := range msgs {
		t, ok := messageEventType(m.State)
		if !ok {
			continue
		}
		if m.State == StateRead && m.Prior != StateDelivered {
			// Read without a delivered before it (it came first, or in the
			// same callback or group): its message.delivered too, so that
			// a receiver gets each once whatever the order and grouping
			// of the callbacks, as the counters count both.
			at := m.At
			if !m.DeliveredAt.IsZero() {
				at = m.DeliveredAt
			}
			evs = append(evs, messageEvent(m, events.MessageDelivered, StateDelivered, at))
		}
		evs = append(evs, messageEvent(m, t, m.State, m.At))
	}
	return events.Append(ctx, db, evs...)
}

// messageEvent is the event of type t announcing that m reached state at at.
func messageEvent(m changedMessage, t events.Type, state State, at time.Time) events.Event {
	data := events.Message{BatchID: m.BatchID, MessageID: m.ID, Phone: m.Phone, State: string(state),
		ProviderMessageID: m.Wamid, ChangedAt: at.UTC()}
	if state == StateFailed {
		data.Error = &events.Error{Code: m.Code, Title: m.Title}
	}
	if m.Category != "" {
		data.Pricing = &events.Pricing{Billable: m.Billable, Category: m.Category, Model: m.Model}
	}
	return events.Event{CompanyID: m.CompanyID, Type: t, At: at, Data: data}
}

// emitFailedAtExpansion records a message.failed event for every failed
// message of a batch being expanded (entries whose target could not send,
// or every contact of a batch that could not be expanded): at expansion
// those are exactly the failed ones.
func emitFailedAtExpansion(ctx context.Context, tx pgx.Tx, batchID string) error {
	rows, err := tx.Query(ctx, `
		SELECT id, company_id, batch_id::text, phone, COALESCE(error_code, 0), COALESCE(error_title, ''), failed_at
		FROM messages WHERE batch_id = $1 AND state = 'failed' ORDER BY seq`, batchID)
	if err != nil {
		return fmt.Errorf("events of failed messages of batch %s: %w", batchID, err)
	}
	msgs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (changedMessage, error) {
		m := changedMessage{State: StateFailed}
		err := r.Scan(&m.ID, &m.CompanyID, &m.BatchID, &m.Phone, &m.Code, &m.Title, &m.At)
		return m, err
	})
	if err != nil {
		return fmt.Errorf("events of failed messages of batch %s: %w", batchID, err)
	}
	return emitMessages(ctx, tx, msgs)
}

// finishedBatch is a batch that just became completed or failed.
type finishedBatch struct {
	id        string
	companyID int64
	kind      string
	status    BatchState
	failure   string
	at        time.Time
}

// emitBatches records batch.completed and batch.failed events, with each
// batch's messages counted by state, with tx, the transaction that
// finished them.
func emitBatches(ctx context.Context, tx pgx.Tx, done []finishedBatch) error {
	if len(done) == 0 {
		return nil
	}
	ids := make([]string, len(done))
	for i, b := range done {
		ids[i] = b.id
	}
	rows, err := tx.Query(ctx, `SELECT batch_id::text, state::text, count(*) FROM messages WHERE batch_id = ANY($1::uuid[]) GROUP BY 1, 2`, ids)
	if err != nil {
		return fmt.Errorf("count messages of finished batches: %w", err)
	}
	counts := map[string]map[string]int{}
	for rows.Next() {
		var b, s string
		var n int
		if err := rows.Scan(&b, &s, &n); err != nil {
			rows.Close()
			return fmt.Errorf("count messages of finished batches: %w", err)
		}
		if counts[b] == nil {
			counts[b] = map[string]int{}
		}
		counts[b][s] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("count messages of finished batches: %w", err)
	}
	evs := make([]events.Event, 0, len(done))
	for _, b := range done {
		t := events.BatchCompleted
		if b.status == BatchFailed {
			t = events.BatchFailed
		}
		evs = append(evs, events.Event{CompanyID: b.companyID, Type: t, At: b.at, Data: events.Batch{
			BatchID: b.id, Kind: b.kind, Status: string(b.status), Counts: counts[b.id], Error: b.failure, ChangedAt: b.at.UTC()}})
	}
	return events.Append(ctx, tx, evs...)
}
