package delivery

import (
	"context"
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
