package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/contacts"
)

// CodeUserStoppedMarketing is the provider's refusal of a marketing message
// to a user who stopped the business's marketing messages: the message
// fails and its contact is opted out of campaigns (reason provider).
const CodeUserStoppedMarketing = 131050

// refusedSQL finds the messages the provider refused with 131050, by id
// ($1) or by wamid ($2).
const refusedSQL = `
SELECT id, company_id, phone, COALESCE(provider_message_id, ''), COALESCE(failed_at, $3)
FROM messages
WHERE (id = ANY($1::bigint[]) OR provider_message_id = ANY($2::text[])) AND error_code = 131050
ORDER BY id`

// optOutRefused opts out the contacts of the messages the provider refused
// with 131050 (named by id or wamid), with tx, the transaction that records
// the refusal. A message already counted changes nothing.
func optOutRefused(ctx context.Context, tx DB, ids []int64, wamids []string, now time.Time) error {
	if len(ids) == 0 && len(wamids) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, refusedSQL, ids, wamids, now)
	if err != nil {
		return fmt.Errorf("find messages refused with 131050: %w", err)
	}
	type refused struct {
		id, company int64
		phone       string
		wamid       string
		at          time.Time
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (refused, error) {
		var x refused
		err := r.Scan(&x.id, &x.company, &x.phone, &x.wamid, &x.at)
		return x, err
	})
	if err != nil {
		return fmt.Errorf("find messages refused with 131050: %w", err)
	}
	for _, x := range list {
		if _, err := contacts.RecordConsent(ctx, tx, contacts.ConsentChange{
			CompanyID: x.company, Phone: x.phone, OptedOut: true, Reason: contacts.ReasonProvider,
			ProviderMessageID: x.wamid, MessageID: x.id, At: x.at,
		}, now); err != nil {
			return fmt.Errorf("opt out the contact of message %d: %w", x.id, err)
		}
	}
	return nil
}

// refusedWamids are the wamids of failed statuses with 131050.
func refusedWamids(rows []statusRow) []string {
	var out []string
	for _, r := range rows {
		if r.status == string(whatsapp.StatusFailed) && r.code == CodeUserStoppedMarketing {
			out = append(out, r.wamid)
		}
	}
	return out
}

// InboundResult says what ReceiveMessages did.
type InboundResult struct {
	// Ignored counts messages to a phone number id no company has.
	Ignored int
	// Created counts contacts created for unknown senders.
	Created int
	// Changed counts contacts whose consent flipped.
	Changed int
}

// ReceiveMessages records messages users sent to the companies' numbers,
// each in its own transaction: the company is the one whose messaging
// account has the number (a message to an unknown number is ignored), the
// sender becomes its contact if it was not one, and a text equal to one of
// the company's opt-out or opt-in keywords, or an opt-out button payload,
// changes the contact's consent (contacts.RecordConsent). A webhook
// delivered twice changes nothing the second time.
func ReceiveMessages(ctx context.Context, db interface {
	DB
	Begin(ctx context.Context) (pgx.Tx, error)
}, msgs []whatsapp.InboundMessage, now time.Time) (InboundResult, error) {
	var res InboundResult
	companies := map[string]int64{}
	settings := map[int64]contacts.OptOutSettings{}
	for _, m := range msgs {
		company, ok := companies[m.PhoneNumberID]
		if !ok {
			err := db.QueryRow(ctx, `SELECT company_id FROM messaging_accounts WHERE phone_number_id = $1`, m.PhoneNumberID).Scan(&company)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				company = 0
			case err != nil:
				return res, fmt.Errorf("find the company of phone number id %s: %w", m.PhoneNumberID, err)
			}
			companies[m.PhoneNumberID] = company
		}
		if company == 0 {
			res.Ignored++
			continue
		}
		set, ok := settings[company]
		if !ok {
			var err error
			if set, err = contacts.LoadOptOutSettings(ctx, db, company); err != nil {
				return res, err
			}
			settings[company] = set
		}
		at := m.Timestamp
		if at.IsZero() {
			at = now
		}
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			optedOut, reason, word, asks := set.Match(m.Text, m.ButtonPayload)
			if !asks {
				_, created, err := contacts.TouchContact(ctx, tx, company, m.From, now)
				if created {
					res.Created++
				}
				return err
			}
			r, err := contacts.RecordConsent(ctx, tx, contacts.ConsentChange{
				CompanyID: company, Phone: m.From, OptedOut: optedOut, Reason: reason, Keyword: word,
				ProviderMessageID: m.ID, At: at,
			}, now)
			if r.Created {
				res.Created++
			}
			if r.Changed {
				res.Changed++
			}
			return err
		})
		if err != nil {
			return res, fmt.Errorf("inbound message %s: %w", m.ID, err)
		}
	}
	return res, nil
}
