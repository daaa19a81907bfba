// Package delivery is the engine both dispatchers share: it turns an accepted
// batch from the SENDS stream into one message per contact, sends each
// message through the channel provider under its messaging account's
// throughput limit, and records every message's state in PostgreSQL.
//
// # The work queue
//
// JetStream carries a batch from the gateway to a dispatcher; the messages
// table is the dispatchers' durable work queue. A batch is acked only once
// its messages are committed ("expansion", one transaction), so an accepted
// batch is never only in memory. Each message is then claimed by one
// dispatcher (FOR UPDATE SKIP LOCKED), sent, and its outcome recorded.
//
// # The record
//
// Every message and batch row is written through pkg/record, which owns the
// states, their moves, the claims and leases, outcomes, status callbacks,
// cancel and completion, with the event of each change in the same
// transaction. This package decides what to write and when; record writes
// it.
//
// # Message batches
//
// A batch send (and a connector send to a campaign) arrives as a
// MessageBatch on <prefix>.batch.<company_id>, which the campaign lane takes
// through a second durable consumer (BatchConsumerName). Each of its entries
// is one campaign-lane message with its own template and account (its
// campaign's, or named directly) and its own personalisation; an entry whose
// target cannot send fails alone (see Expander.Messages).
//
// # The duplicate window
//
// A message is sent twice only when a dispatcher dies after the provider
// answered and before the outcome was committed (see pkg/record).
package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

// Clock is where every query takes "now" from, never SQL now(), so that
// tests can stand outside delivery hours or past scheduled_at.
type Clock func() time.Time

// Throttle is the account throughput limiter shared by every replica
// (pkg/ratelimit's Limiter): WaitEach waits for n sends on key at perSecond,
// handing each grant to use as it comes, and when ctx ends first returns
// how many were not granted.
type Throttle interface {
	WaitEach(ctx context.Context, key string, perSecond, n int, use func(granted int)) (left int, err error)
}

// Config is the tuning of a dispatcher, read from the environment.
type Config struct {
	// Workers bounds the provider calls in flight (and so the claimed rows).
	Workers int `env:"PARLEY_DISPATCH_WORKERS" envDefault:"512"`
	// ClaimBatch bounds the messages one claim takes.
	ClaimBatch int `env:"PARLEY_DISPATCH_CLAIM_BATCH" envDefault:"500"`
	// Lease is how old a claim must be before any dispatcher sends its
	// message again; it must exceed the provider timeout plus a flush.
	Lease time.Duration `env:"PARLEY_DISPATCH_LEASE" envDefault:"60s"`
	// MaxAttempts bounds the sends of one message (retries included).
	MaxAttempts int `env:"PARLEY_DISPATCH_MAX_ATTEMPTS" envDefault:"8"`
	// BackoffBase and BackoffCap shape the exponential backoff, with full
	// jitter, between attempts after a retryable error.
	BackoffBase time.Duration `env:"PARLEY_DISPATCH_BACKOFF_BASE" envDefault:"1s"`
	BackoffCap  time.Duration `env:"PARLEY_DISPATCH_BACKOFF_CAP" envDefault:"5m"`
	// PollInterval is how often a dispatcher looks for accounts with due
	// work (scheduled sends, retries, deferred messages, other replicas'
	// batches); a batch it expands itself wakes its account at once.
	PollInterval time.Duration `env:"PARLEY_DISPATCH_POLL_INTERVAL" envDefault:"250ms"`
	// FlushInterval and FlushSize bound how long outcomes wait to be recorded.
	FlushInterval time.Duration `env:"PARLEY_DISPATCH_FLUSH_INTERVAL" envDefault:"10ms"`
	FlushSize     int           `env:"PARLEY_DISPATCH_FLUSH_SIZE" envDefault:"1000"`
	// Recorders is how many flushes may run at once.
	Recorders int `env:"PARLEY_DISPATCH_RECORDERS" envDefault:"4"`
	// SweepInterval is how often stale claims are returned and early status
	// callbacks applied.
	SweepInterval time.Duration `env:"PARLEY_DISPATCH_SWEEP_INTERVAL" envDefault:"5s"`
	// HandoffMax bounds the messages a dispatcher's expansions have claimed
	// for it that wait for their account's lane worker (handoff.go): beyond
	// it, a fresh batch's messages are queued for the lane workers' claims;
	// 0 turns the hand-off off.
	HandoffMax int `env:"PARLEY_DISPATCH_HANDOFF_MAX" envDefault:"20000"`
	// ExpandWorkers is how many batches are expanded at once.
	ExpandWorkers int `env:"PARLEY_DISPATCH_EXPAND_WORKERS" envDefault:"4"`
	// AckWait is how long JetStream waits for a batch's ack before
	// redelivering it; long expansions report progress well within it.
	AckWait time.Duration `env:"PARLEY_DISPATCH_ACK_WAIT" envDefault:"30s"`
	// CacheTTL bounds how stale a cached account, template or token may be.
	CacheTTL time.Duration `env:"PARLEY_DISPATCH_CACHE_TTL" envDefault:"5s"`
	// ShutdownTimeout bounds the wait for in-flight sends and the last flush.
	ShutdownTimeout time.Duration `env:"PARLEY_DISPATCH_SHUTDOWN_TIMEOUT" envDefault:"30s"`

	// PairInterval is the shortest gap between two messages from one
	// number to one user (Meta, "Throughput": about one every 6 s, 131056
	// closer); a message that would come sooner waits, the rest of its
	// claim goes. Half a second over Meta's 6 s covers the time between a
	// send here and its receipt there. 0 turns the pacing off.
	PairInterval time.Duration `env:"PARLEY_DISPATCH_PAIR_INTERVAL" envDefault:"6500ms"`
	// MessagingLimitWindow is the moving period of a business portfolio's
	// messaging limit (Meta, "Messaging limits": 24 hours), plus five
	// minutes so that a user leaves Parley's count after Meta's.
	MessagingLimitWindow time.Duration `env:"PARLEY_DISPATCH_MESSAGING_LIMIT_WINDOW" envDefault:"24h5m"`
	// ServiceWindow is how long a user's message opens the customer
	// service window, inside which a message does not count against the
	// messaging limit (Meta: 24 hours).
	ServiceWindow time.Duration `env:"PARLEY_DISPATCH_SERVICE_WINDOW" envDefault:"24h"`
	// MarketingLimitRetry is how long a message refused with 131049 (the
	// user's marketing message limit, "resending sooner than 24 h fails
	// again") is held before its one retry; a second 131049 fails it. 0
	// retries it at the next sweep.
	MarketingLimitRetry time.Duration `env:"PARLEY_DISPATCH_MARKETING_LIMIT_RETRY" envDefault:"24h"`
	// TemplateSyncInterval is how often one campaign dispatcher of the
	// fleet reads every WhatsApp Business Account's templates from the
	// provider and applies what its webhooks missed (Deps.SyncTemplates).
	TemplateSyncInterval time.Duration `env:"PARLEY_TEMPLATE_SYNC_INTERVAL" envDefault:"5m"`
	// MessagesRetention is how long the record keeps messages and inbound
	// messages (record.KeepRecord, run by the campaign lane's sweeps every
	// hour): a week (a partition) is dropped whole once it ended this long
	// ago and none of its messages can still be sent. At least a week; 0
	// keeps everything. The counters of the reports are kept.
	MessagesRetention time.Duration `env:"PARLEY_MESSAGES_RETENTION" envDefault:"2160h"`
}

// Validate reports every problem at once. providerTimeout is the channel
// client's per-call timeout, which the lease must outlast.
func (c Config) Validate(providerTimeout time.Duration) error {
	var errs []error
	positive := func(name string, v int) {
		if v < 1 {
			errs = append(errs, fmt.Errorf("%s must be at least 1", name))
		}
	}
	positive("PARLEY_DISPATCH_WORKERS", c.Workers)
	positive("PARLEY_DISPATCH_CLAIM_BATCH", c.ClaimBatch)
	positive("PARLEY_DISPATCH_MAX_ATTEMPTS", c.MaxAttempts)
	positive("PARLEY_DISPATCH_FLUSH_SIZE", c.FlushSize)
	positive("PARLEY_DISPATCH_RECORDERS", c.Recorders)
	positive("PARLEY_DISPATCH_EXPAND_WORKERS", c.ExpandWorkers)
	if c.HandoffMax < 0 {
		errs = append(errs, errors.New("PARLEY_DISPATCH_HANDOFF_MAX must not be negative"))
	}
	durations := []struct {
		name string
		v    time.Duration
	}{
		{"PARLEY_DISPATCH_LEASE", c.Lease}, {"PARLEY_DISPATCH_BACKOFF_BASE", c.BackoffBase},
		{"PARLEY_DISPATCH_BACKOFF_CAP", c.BackoffCap}, {"PARLEY_DISPATCH_POLL_INTERVAL", c.PollInterval},
		{"PARLEY_DISPATCH_FLUSH_INTERVAL", c.FlushInterval}, {"PARLEY_DISPATCH_SWEEP_INTERVAL", c.SweepInterval},
		{"PARLEY_DISPATCH_ACK_WAIT", c.AckWait}, {"PARLEY_DISPATCH_CACHE_TTL", c.CacheTTL},
		{"PARLEY_DISPATCH_SHUTDOWN_TIMEOUT", c.ShutdownTimeout},
		{"PARLEY_DISPATCH_MESSAGING_LIMIT_WINDOW", c.MessagingLimitWindow}, {"PARLEY_DISPATCH_SERVICE_WINDOW", c.ServiceWindow},
		{"PARLEY_TEMPLATE_SYNC_INTERVAL", c.TemplateSyncInterval},
	}
	for _, d := range durations {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive", d.name))
		}
	}
	if c.MessagesRetention != 0 && c.MessagesRetention < 7*24*time.Hour {
		errs = append(errs, errors.New("PARLEY_MESSAGES_RETENTION must be at least 168h (a week), or 0 to keep everything"))
	}
	if c.PairInterval < 0 || c.MarketingLimitRetry < 0 {
		errs = append(errs, errors.New("PARLEY_DISPATCH_PAIR_INTERVAL and PARLEY_DISPATCH_MARKETING_LIMIT_RETRY must not be negative"))
	}
	if c.BackoffCap < c.BackoffBase {
		errs = append(errs, errors.New("PARLEY_DISPATCH_BACKOFF_CAP must not be below PARLEY_DISPATCH_BACKOFF_BASE"))
	}
	if min := providerTimeout + c.FlushInterval + time.Second; c.Lease < min {
		errs = append(errs, fmt.Errorf("PARLEY_DISPATCH_LEASE %s must exceed the provider timeout plus a flush (at least %s)", c.Lease, min))
	}
	if c.AckWait < time.Second {
		errs = append(errs, errors.New("PARLEY_DISPATCH_ACK_WAIT must be at least 1s"))
	}
	return errors.Join(errs...)
}

// ProviderConfig is how the dispatchers reach the WhatsApp Cloud API (or
// provider-sim on loopback): the admin service and parleyctl read the same
// variables to manage templates, hence its home in pkg/channel/whatsapp.
type ProviderConfig = whatsapp.ProviderConfig
