package webhooks

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/pkg/events"
)

// ErasePhone removes, with db (the erasure's transaction), the company's
// webhook deliveries whose event names phone, pending or done, with their
// attempts; it returns how many deliveries. It reads every delivery of the
// company (no index serves the event's phone): an erasure is rare, and a
// company's deliveries are kept only for PARLEY_WEBHOOKS_ATTEMPT_RETENTION.
// Erasure deletes rows; the retention drops whole weeks.
func ErasePhone(ctx context.Context, db events.DB, companyID int64, phone string) (int64, error) {
	rows, err := db.Query(ctx, `DELETE FROM webhook_deliveries WHERE company_id = $1 AND payload->'data'->>'phone' = $2
		RETURNING id, created_at, endpoint_id::text`, companyID, phone)
	if err != nil {
		return 0, fmt.Errorf("erase the webhook deliveries of a contact: %w", err)
	}
	type erased struct {
		id       int64
		week     time.Time
		endpoint string
	}
	gone, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (erased, error) {
		var e erased
		err := r.Scan(&e.id, &e.week, &e.endpoint)
		return e, err
	})
	if err != nil {
		return 0, fmt.Errorf("erase the webhook deliveries of a contact: %w", err)
	}
	if len(gone) == 0 {
		return 0, nil
	}
	ids := make([]int64, len(gone))
	weeks := make([]time.Time, len(gone))
	endpoints := make([]string, len(gone))
	for i, e := range gone {
		ids[i], weeks[i], endpoints[i] = e.id, e.week, e.endpoint
	}
	// No foreign key cascades to the attempts (migration 00019). A
	// statement of its own, so that it also sees an attempt recorded while
	// the one above waited for its delivery's lock. The weeks and endpoints
	// narrow the partitions and the index it reads.
	if _, err := db.Exec(ctx, `DELETE FROM webhook_attempts
		WHERE delivery_id = ANY($1) AND delivery_created_at = ANY($2) AND endpoint_id = ANY($3::uuid[])`,
		ids, weeks, endpoints); err != nil {
		return 0, fmt.Errorf("erase the webhook attempts of a contact: %w", err)
	}
	return int64(len(gone)), nil
}
