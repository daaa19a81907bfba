package record

import (
	"context"
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

// openMessages is a message whose week must stay: it can still be sent.
const openMessages = `state IN ('queued', 'scheduled', 'deferred', 'sending', 'held')`

var (
	messagesLifetime = store.Expiring{Parent: "messages", Open: openMessages}
	inboundLifetime  = store.Expiring{Parent: "inbound_messages"}
)

// KeepRecord creates the record's weeks ahead of now and, with a retention
// (0 keeps everything), drops the weeks of messages and inbound messages
// that ended at or before now-retention and hold nothing open (store.Keep).
func KeepRecord(ctx context.Context, pool *pgxpool.Pool, now time.Time, retention time.Duration) (store.Kept, error) {
	return store.Keep(ctx, pool, now, retention, messagesLifetime, inboundLifetime)
}
