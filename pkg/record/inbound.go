package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/contacts"
	"github.com/parleyhq/parley/pkg/events"
)

// ServiceWindow is how long after a contact's last message a business may
// send it free-form (session) messages: Meta's customer service window.
const ServiceWindow = 24 * time.Hour

// InboundResult says what Receive did.
type InboundResult struct {
	// Recorded counts the messages recorded now.
	Recorded int
	// Repeated counts the messages recorded before (Meta repeats webhooks).
	Repeated int
	// Ignored counts messages to a phone number id no company has.
	Ignored int
	// Created counts contacts created for unknown senders.
	Created int
	// Changed counts contacts whose consent flipped.
	Changed int
}

// receiveSQL records one inbound message, once per wamid, with the
// business message it quotes (when Parley sent it), and opens or extends
// the conversation's window to the message's time; nothing when the wamid
// was recorded before.
const receiveSQL = `
WITH quoted AS (
	SELECT id, batch_id FROM messages WHERE provider_message_id = $7 AND company_id = $1
), ins AS (
	INSERT INTO inbound_messages (company_id, messaging_account_id, phone, wamid, type, content,
		context_wamid, context_message_id, context_batch_id, sent_at, received_at)
	SELECT $1, $2, $3, $4, $5, $6, NULLIF($7, ''), (SELECT id FROM quoted), (SELECT batch_id FROM quoted), $8, $9
	ON CONFLICT (wamid, sent_at) DO NOTHING
	RETURNING id, context_message_id, context_batch_id::text
), con AS (
	-- The sender becomes the company's contact, with its profile name
	-- ($10 skips this for a message that changes consent: RecordConsent
	-- does it); an unchanged name writes nothing.
	INSERT INTO contacts AS c (company_id, phone, profile_name, created_at, updated_at)
	SELECT $1, $3, NULLIF($11, ''), $9, $9 FROM ins WHERE $10
	ON CONFLICT (company_id, phone) DO UPDATE SET profile_name = EXCLUDED.profile_name, updated_at = EXCLUDED.updated_at
		WHERE EXCLUDED.profile_name IS NOT NULL AND c.profile_name IS DISTINCT FROM EXCLUDED.profile_name
	RETURNING (xmax = 0) AS created
), win AS (
	INSERT INTO conversation_windows AS w (messaging_account_id, phone, company_id, last_inbound_at, last_inbound_id)
	SELECT $2, $3, $1, $12, ins.id FROM ins
	ON CONFLICT (messaging_account_id, phone) DO UPDATE SET
		last_inbound_id = CASE WHEN EXCLUDED.last_inbound_at >= w.last_inbound_at THEN EXCLUDED.last_inbound_id ELSE w.last_inbound_id END,
		last_inbound_at = GREATEST(w.last_inbound_at, EXCLUDED.last_inbound_at)
	RETURNING last_inbound_at
)
SELECT ins.id, ins.context_message_id, ins.context_batch_id, win.last_inbound_at,
	COALESCE((SELECT created FROM con), false) FROM ins, win`

// number is a business number as the webhook names it.
type number struct {
	companyID int64
	accountID int64
	name      string
}

// Receive records the messages contacts sent to the companies' numbers,
// each in its own transaction (the webhook's delivery answers 200 only once
// all are recorded, so that Meta repeats a failed one):
//   - the company is the one whose messaging account has the number; a
//     message to a number no company has is ignored;
//   - the message is recorded once per wamid (a repeated webhook changes
//     nothing), with its content and the business message it quotes;
//   - the sender becomes the company's contact if it was not one, with its
//     WhatsApp profile name;
//   - a text equal to one of the company's opt-out or opt-in keywords, or an
//     opt-out button payload, changes the contact's consent;
//   - the conversation's 24-hour window opens or extends to the message's
//     time (when the contact sent it, as Meta computes the window);
//   - a message.received event is appended for the company's endpoints.
func Receive(ctx context.Context, db TxDB, msgs []whatsapp.InboundMessage, now time.Time) (InboundResult, error) {
	var res InboundResult
	numbers := map[string]number{}
	settings := map[int64]contacts.OptOutSettings{}
	for _, m := range msgs {
		n, ok := numbers[m.PhoneNumberID]
		if !ok {
			err := db.QueryRow(ctx, `SELECT company_id, id, name FROM messaging_accounts WHERE phone_number_id = $1`,
				m.PhoneNumberID).Scan(&n.companyID, &n.accountID, &n.name)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return res, fmt.Errorf("find the company of phone number id %s: %w", m.PhoneNumberID, err)
			}
			numbers[m.PhoneNumberID] = n
		}
		if n.companyID == 0 {
			res.Ignored++
			continue
		}
		set, ok := settings[n.companyID]
		if !ok {
			var err error
			if set, err = contacts.LoadOptOutSettings(ctx, db, n.companyID); err != nil {
				return res, err
			}
			settings[n.companyID] = set
		}
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			return receiveOne(ctx, tx, n, set, m, now, &res)
		})
		if err != nil {
			return res, fmt.Errorf("inbound message %s: %w", m.ID, err)
		}
	}
	return res, nil
}

func receiveOne(ctx context.Context, tx pgx.Tx, n number, set contacts.OptOutSettings, m whatsapp.InboundMessage, now time.Time, res *InboundResult) error {
	// sent_at is the webhook's own time, as it says, so that a webhook
	// repeated later finds its row (the time is in the table's unique key:
	// its partition key).
	sentAt, at := m.Timestamp, m.Timestamp
	if sentAt.IsZero() {
		sentAt = now
	}
	if at.IsZero() || at.After(now) {
		// No time, or a clock ahead of ours: the window runs from when
		// Parley heard of it.
		at = now
	}
	content, err := json.Marshal(m.Content)
	if err != nil {
		return fmt.Errorf("encode content: %w", err)
	}
	var id int64
	var quotedID *int64
	var quotedBatch *string
	var windowFrom time.Time
	var created bool
	optedOut, reason, word, asks := set.Match(m.Text, m.ButtonPayload)
	profile := truncate(m.ProfileName, 256)
	err = tx.QueryRow(ctx, receiveSQL, n.companyID, n.accountID, m.From, m.ID, m.Content.Type, content,
		m.ContextID, sentAt, now, !asks, profile, at).Scan(&id, &quotedID, &quotedBatch, &windowFrom, &created)
	if errors.Is(err, pgx.ErrNoRows) {
		res.Repeated++
		return nil
	}
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	res.Recorded++
	if created {
		res.Created++
	}
	if err := markReplied(ctx, tx, n, m.From, quotedID, at, now); err != nil {
		return err
	}
	if asks {
		r, err := contacts.RecordConsent(ctx, tx, contacts.ConsentChange{
			CompanyID: n.companyID, Phone: m.From, OptedOut: optedOut, Reason: reason, Keyword: word,
			ProviderMessageID: m.ID, At: at,
		}, now)
		if err != nil {
			return err
		}
		if r.Created {
			res.Created++
		}
		if r.Changed {
			res.Changed++
		}
		if profile != "" {
			if _, err := tx.Exec(ctx, `UPDATE contacts SET profile_name = $3, updated_at = $4
				WHERE company_id = $1 AND phone = $2 AND profile_name IS DISTINCT FROM $3`,
				n.companyID, m.From, profile, now); err != nil {
				return fmt.Errorf("contact profile name: %w", err)
			}
		}
	}
	ev := events.Received{MessageID: id, Wamid: m.ID, Phone: m.From, ProfileName: m.ProfileName,
		MessagingAccountID: n.accountID, MessagingAccountName: n.name, Type: m.Content.Type, Content: content,
		SentAt: at, ReceivedAt: now, WindowExpiresAt: windowFrom.Add(ServiceWindow)}
	if m.ContextID != "" {
		ev.Context = &events.Context{Wamid: m.ContextID}
		if quotedID != nil {
			ev.Context.MessageID = *quotedID
		}
		if quotedBatch != nil {
			ev.Context.BatchID = *quotedBatch
		}
	}
	return events.Append(ctx, tx, events.Event{CompanyID: n.companyID, Type: events.MessageReceived, At: now, Data: ev})
}

// markRepliedSQL marks the message a contact's inbound message answers:
// the one it quotes ($4), else the last one sent to the contact from the
// same number in the ReplyAttribution before it. The inbound message's
// time ($5) has whole seconds (the Cloud API's timestamps): the send must
// precede its receipt ($7), not that time. Once per message.
const markRepliedSQL = `
UPDATE messages SET replied_at = $5
WHERE id = COALESCE($4, (SELECT id FROM messages WHERE company_id = $1 AND phone = $2 AND messaging_account_id = $3
		AND sent_at > $5::timestamptz - $6::interval AND sent_at <= $7::timestamptz ORDER BY id DESC LIMIT 1))
  AND replied_at IS NULL
RETURNING batch_id::text`

// markReplied records that a contact answered a message Parley sent it,
// and counts it (the replied metric of reports).
func markReplied(ctx context.Context, tx pgx.Tx, n number, phone string, quoted *int64, at, now time.Time) error {
	var batch string
	err := tx.QueryRow(ctx, markRepliedSQL, n.companyID, phone, n.accountID, quoted, at, ReplyAttribution, now).Scan(&batch)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mark the message replied to: %w", err)
	}
	d := deltas{}
	d.add(batch, at, metricReplied, 0, "", 1)
	return d.write(ctx, tx)
}

// truncate keeps at most n runes of s.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}
