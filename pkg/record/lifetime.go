package record

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/pkg/store"
)

// The record's lifetime: messages and inbound_messages are partitioned by
// week (migration 00018; a message's week is its batch's accepted_at, an
// inbound message's the time its webhook gives). KeepRecord creates the
// weeks ahead and drops, as whole partitions, the weeks that ended longer
// than the retention ago, except a week that still holds a message that
// can be sent: one queued, scheduled, deferred, held or being sent stays
// with its week until it is final.

// WeeksAhead is how many weeks after the current one KeepRecord keeps
// created, so that a week's first message never waits for its partition.
const WeeksAhead = 2

// openMessages is a message whose week must stay: it can still be sent.
const openMessages = `state IN ('queued', 'scheduled', 'deferred', 'sending', 'held')`

var (
	messagesLifetime = store.Expiring{Parent: "messages", Open: openMessages}
	inboundLifetime  = store.Expiring{Parent: "inbound_messages"}
)

// Kept is what one KeepRecord did.
type Kept struct {
	// Created are the weekly partitions it created.
	Created []string
	// Dropped are the partitions it dropped (expired and closed).
	Dropped []string
	// Open are expired partitions kept because a message in them can
	// still be sent.
	Open []string
}

// KeepRecord creates the record's weeks ahead of now and, with a retention
// (0 keeps everything), drops the weeks that ended at or before
// now-retention and hold nothing open. Every process may run it; a table
// too busy to lock within store.DropLockTimeout is left for the next run
// (store.ErrPartitionBusy).
func KeepRecord(ctx context.Context, pool *pgxpool.Pool, now time.Time, retention time.Duration) (Kept, error) {
	var k Kept
	var errs []error
	for _, e := range []store.Expiring{messagesLifetime, inboundLifetime} {
		created, err := store.CreateWeeks(ctx, pool, e.Parent, now, WeeksAhead)
		k.Created = append(k.Created, created...)
		if err != nil {
			errs = append(errs, err)
		}
		if retention <= 0 {
			continue
		}
		dropped, open, err := store.DropExpired(ctx, pool, e, now.Add(-retention))
		k.Dropped, k.Open = append(k.Dropped, dropped...), append(k.Open, open...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return k, errors.Join(errs...)
}
