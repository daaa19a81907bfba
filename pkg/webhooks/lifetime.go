package webhooks

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/store"
)

// The deliveries' lifetime: webhook_deliveries and webhook_attempts are
// partitioned by week (migration 00019). A delivery's week is its event's
// (EventTime, its created_at), an attempt's its delivery's. KeepDeliveries
// creates the weeks ahead and drops, as whole partitions, the weeks that
// ended longer than Config.AttemptRetention ago with their attempts,
// except a week that still holds a pending delivery: it stays, attempts
// and all, until none of its deliveries is pending.

// deliveriesLifetime drops a week of deliveries with the week of their
// attempts, unless one of its deliveries can still be sent.
var deliveriesLifetime = store.Expiring{
	Parent: "webhook_deliveries",
	Open:   `status = 'pending'`,
	With:   []string{"webhook_attempts"},
}

// KeepDeliveries creates the weeks of the deliveries and attempts ahead of
// now and drops the weeks that ended at or before now minus the retention
// and hold no pending delivery, with their attempts (store.Keep). Every
// sender replica may run it.
func (s *Store) KeepDeliveries(ctx context.Context, now time.Time) (store.Kept, error) {
	return store.Keep(ctx, s.pool, now, s.cfg.AttemptRetention, deliveriesLifetime)
}

// EventTime is when the event with this id happened for its deliveries:
// their created_at, the week they are kept in. It is the time in the id, a
// UUIDv7 that events.Append mints as the change commits (Parley's own
// clock, never a provider's), or occurredAt for an id of another version.
// An event fanned out again gives the same time, so its deliveries' unique
// key (endpoint_id, event_id, created_at) still catches the repeat.
func EventTime(eventID string, occurredAt time.Time) time.Time {
	id, err := uuid.Parse(eventID)
	if err != nil || id.Version() != 7 {
		return occurredAt
	}
	return time.Unix(id.Time().UnixTime()).UTC()
}
