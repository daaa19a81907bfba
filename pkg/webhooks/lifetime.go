package webhooks

import (
	"context"
	"errors"
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

// WeeksAhead is how many weeks after the current one KeepDeliveries keeps
// created, so that a week's first delivery never waits for its partition.
const WeeksAhead = 2

// deliveriesLifetime drops a week of deliveries with the week of their
// attempts, unless one of its deliveries can still be sent.
var deliveriesLifetime = store.Expiring{
	Parent: "webhook_deliveries",
	Open:   `status = 'pending'`,
	With:   []string{"webhook_attempts"},
}

// Kept is what one KeepDeliveries did.
type Kept struct {
	// Created are the weekly partitions it created.
	Created []string
	// Dropped are the partitions of webhook_deliveries it dropped, each
	// with the attempts' partition of the same week.
	Dropped []string
	// Open are expired partitions kept because a delivery in them is
	// still pending.
	Open []string
}

// KeepDeliveries creates the weeks of the deliveries and attempts from the
// week of now through WeeksAhead after it, and drops the weeks that ended at
// or before now minus the retention and hold no pending delivery. Every
// sender replica may run it; a table too busy to lock within
// store.DropLockTimeout is left for the next run (store.ErrPartitionBusy).
func (s *Store) KeepDeliveries(ctx context.Context, now time.Time) (Kept, error) {
	var k Kept
	var errs []error
	for _, table := range []string{deliveriesLifetime.Parent, deliveriesLifetime.With[0]} {
		created, err := store.CreateWeeks(ctx, s.pool, table, now, WeeksAhead)
		k.Created = append(k.Created, created...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	dropped, open, err := store.DropExpired(ctx, s.pool, deliveriesLifetime, now.Add(-s.cfg.AttemptRetention))
	k.Dropped, k.Open = dropped, open
	if err != nil {
		errs = append(errs, err)
	}
	return k, errors.Join(errs...)
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
