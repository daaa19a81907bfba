package record

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/pkg/events"
	"github.com/parleyhq/parley/pkg/webhooks"
)

// Erasure is what EraseContact did (DELETE /api/contacts/{phone}).
type Erasure struct {
	Phone string `json:"phone"`
	// Contact is whether the company had a contact of the number (removed
	// with its names, variables, profile name, consent history and
	// segment memberships).
	Contact bool `json:"contact"`
	// Messages counts the messages sent to the number that were anonymised:
	// their state, times, error codes and batch stay, for the counts.
	Messages int64 `json:"messages"`
	// Cancelled counts those that were still waiting to be sent.
	Cancelled int64 `json:"cancelled"`
	// Inbound counts the messages the number sent that were anonymised.
	Inbound int64 `json:"inbound_messages"`
	// Events counts the events naming the number that were removed before
	// their delivery (outbox rows) or after (webhook deliveries).
	Events   int64     `json:"events"`
	ErasedAt time.Time `json:"erased_at"`
}

// EraseContact erases what the company holds about one number, in one
// transaction (GDPR Art. 17): the contact row (names, variables, profile
// name, consent history, segment memberships), the number, contents and
// wamids of the messages either way (each message keeps its state, times,
// error code and batch: anonymous counts), the conversation windows, and
// the events that name the number and were not delivered yet, or were
// (webhook deliveries). Messages still waiting to be sent are cancelled
// first. Nothing is found: an Erasure of zeros, not an error (an erasure
// is idempotent).
func EraseContact(ctx context.Context, db TxDB, companyID int64, phone string, now time.Time) (Erasure, error) {
	e := Erasure{Phone: phone, ErasedAt: now}
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		e = Erasure{Phone: phone, ErasedAt: now}
		rows, err := tx.Query(ctx, `
			UPDATE messages SET state = 'cancelled', cancelled_at = $3, updated_at = $3
			WHERE company_id = $1 AND phone = $2 AND state IN ('queued', 'scheduled', 'deferred', 'held')
			RETURNING batch_id::text`, companyID, phone, now)
		if err != nil {
			return fmt.Errorf("cancel the waiting messages: %w", err)
		}
		batches, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("cancel the waiting messages: %w", err)
		}
		e.Cancelled = int64(len(batches))
		if err := countCancelledEach(ctx, tx, batches, now); err != nil {
			return err
		}
		t, err := tx.Exec(ctx, `
			UPDATE messages SET phone = '', contact_id = NULL, overrides = NULL, content = NULL,
				provider_message_id = NULL, updated_at = $3
			WHERE company_id = $1 AND phone = $2`, companyID, phone, now)
		if err != nil {
			return fmt.Errorf("anonymise the messages: %w", err)
		}
		e.Messages = t.RowsAffected()
		if t, err = tx.Exec(ctx, `
			UPDATE inbound_messages SET phone = '', wamid = NULL, content = NULL, context_wamid = NULL, erased_at = $3
			WHERE company_id = $1 AND phone = $2`, companyID, phone, now); err != nil {
			return fmt.Errorf("anonymise the inbound messages: %w", err)
		}
		e.Inbound = t.RowsAffected()
		if _, err := tx.Exec(ctx, `DELETE FROM conversation_windows WHERE company_id = $1 AND phone = $2`, companyID, phone); err != nil {
			return fmt.Errorf("erase the windows: %w", err)
		}
		if t, err = tx.Exec(ctx, `DELETE FROM contacts WHERE company_id = $1 AND phone = $2`, companyID, phone); err != nil {
			return fmt.Errorf("erase the contact: %w", err)
		}
		e.Contact = t.RowsAffected() > 0
		pending, err := events.ErasePhone(ctx, tx, companyID, phone)
		if err != nil {
			return err
		}
		delivered, err := webhooks.ErasePhone(ctx, tx, companyID, phone)
		if err != nil {
			return err
		}
		e.Events = pending + delivered
		// A batch whose last waiting message was this number's is done.
		return CompleteBatches(ctx, tx, unique(batches), now)
	})
	if err != nil {
		return Erasure{}, fmt.Errorf("erase %s: %w", phone, err)
	}
	return e, nil
}

func unique(ss []string) []string {
	seen := make(map[string]bool, len(ss))
	out := ss[:0]
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
