package contacts

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

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
// changes the contact's consent (RecordConsent). A webhook
// delivered twice changes nothing the second time.
func ReceiveMessages(ctx context.Context, db interface {
	DB
	Begin(ctx context.Context) (pgx.Tx, error)
}, msgs []whatsapp.InboundMessage, now time.Time) (InboundResult, error) {
	var res InboundResult
	companies := map[string]int64{}
	settings := map[int64]OptOutSettings{}
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
			if set, err = LoadOptOutSettings(ctx, db, company); err != nil {
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
				_, created, err := TouchContact(ctx, tx, company, m.From, now)
				if created {
					res.Created++
				}
				return err
			}
			r, err := RecordConsent(ctx, tx, ConsentChange{
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
