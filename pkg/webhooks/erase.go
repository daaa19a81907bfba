package webhooks

import (
	"context"
	"fmt"

	"github.com/parleyhq/parley/pkg/events"
)

// ErasePhone removes, with db (the erasure's transaction), the company's
// webhook deliveries whose event names phone, pending or done, with their
// attempts; it returns how many. It reads every delivery of the company
// (no index serves the event's phone): an erasure is rare, and a company's
// deliveries are kept only for PARLEY_WEBHOOKS_ATTEMPT_RETENTION.
func ErasePhone(ctx context.Context, db events.DB, companyID int64, phone string) (int64, error) {
	t, err := db.Exec(ctx, `DELETE FROM webhook_deliveries WHERE company_id = $1 AND payload->'data'->>'phone' = $2`, companyID, phone)
	if err != nil {
		return 0, fmt.Errorf("erase the webhook deliveries of a contact: %w", err)
	}
	return t.RowsAffected(), nil
}
