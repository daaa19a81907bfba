// Package record owns Parley's record of what was sent: the batches and
// messages tables. Every write of either table is a function of this
// package, and each writes the events of its change (pkg/events) in the
// same transaction. The dispatchers (pkg/delivery), the gateway and the
// admin service call it; TestOnlyRecordWritesMessagesAndBatches fails when
// SQL that writes those tables appears anywhere else.
//
// # Message states
//
//	queued     due at not_before (now, or after a retry's backoff)
//	scheduled  held until the batch's scheduled_at
//	deferred   outside the account's delivery hours; due at the next opening
//	held       waits for something outside Parley (hold_reason): its template's
//	           review or the end of its pause (template_pending, template_paused),
//	           or room under the portfolio's messaging limit (messaging_limit, due
//	           at not_before)
//	sending    claimed by a dispatcher at claimed_at; the provider call is under way
//	sent       the provider accepted it (provider_message_id is its wamid)
//	delivered  the provider's status callback said so
//	read       likewise
//	failed     permanent provider error (error_code, error_title), retries
//	           exhausted, or the batch could not be expanded
//	skipped_opt_out  a non-forced campaign message to a contact who opted out
//	cancelled  its batch was cancelled before the message was handed to the
//	           provider
//
// # Moves
//
// Each function moves messages only along these edges (Moves):
//
//	created (expansion)   -> queued, scheduled, failed; sending or skipped_opt_out (a hand-off's claim)
//	queued, scheduled, deferred -> deferred (Defer), sending or skipped_opt_out (Claim), cancelled (Cancel)
//	sending -> sent, failed, queued (RecordOutcomes; a retry or a release), queued or failed (ReturnStale),
//	           cancelled (either, for a message whose contact was erased while it was sent: EraseContact)
//	sent -> delivered, read, failed; failed -> delivered, read; delivered -> read (ApplyStatuses)
//	queued, scheduled, deferred -> held, failed (ApplyTemplateChange: a template paused, disabled, rejected)
//	sending -> held (RecordOutcomes: the template paused, no room under the messaging limit)
//	failed -> held (ApplyStatuses: a first 131049, the user's marketing limit, held for its one retry)
//	held -> queued (ApplyTemplateChange, ReleaseDueHolds), failed (ApplyTemplateChange), cancelled (Cancel)
//
// sent, delivered, read, failed, skipped_opt_out and cancelled are terminal
// for the dispatchers; a status callback moves a message forward only, by
// the Cloud API's rank sent < failed < delivered < read. Two edges look
// backwards and are not: a queued message whose late outcome arrives after
// the lease returned it still records that outcome (the provider has it),
// and a cancelled message whose stale claim the provider accepted records
// sent.
//
// # Batch lifecycle
//
//	accepted   in the stream, waiting for a dispatcher (GET finds it there: Pending)
//	scheduled  expanded; every message waits for scheduled_at
//	processing expanded; some message is due, in flight or waiting
//	completed  every message is terminal
//	failed     could not be expanded (campaign, automation, template or
//	           account gone, account disconnected); its messages say why
//	cancelled  cancelled before the provider accepted any of its messages
//	           (a batch cancelled later is completed, with a cancelled count)
//
// # Cancellation
//
// A cancelled batch has batches.cancelled_at. Cancel turns its queued,
// scheduled and deferred messages into cancelled, under the batch's row
// lock and with a state-conditional update; Claim takes rows FOR UPDATE
// SKIP LOCKED and turns them into sending in the same statement, so a
// message is either claimed or cancelled, never both. Messages that come
// back to the queue later (a retry, a released or stale claim) are
// cancelled by CompleteBatches in the transaction that put them there; a
// batch cancelled while still in the stream is recorded with status
// cancelled (CancelPending), and its expansion creates its messages
// cancelled.
//
// # The duplicate window
//
// A message leaves sending only through RecordOutcomes or ReturnStale (a
// claim older than the lease goes back to queued), and sent messages are
// never claimed. So a message is sent twice only when a dispatcher dies
// after the provider answered and before the outcome was committed.
package record

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// State is a message's state (the message_state enum).
type State string

// Message states; see the package documentation.
const (
	StateQueued        State = "queued"
	StateScheduled     State = "scheduled"
	StateDeferred      State = "deferred"
	StateSending       State = "sending"
	StateSent          State = "sent"
	StateDelivered     State = "delivered"
	StateRead          State = "read"
	StateFailed        State = "failed"
	StateSkippedOptOut State = "skipped_opt_out"
	StateCancelled     State = "cancelled"
	// StateHeld waits for something outside Parley (HoldReason): its
	// template's review or the end of its pause, or room under the
	// portfolio's messaging limit.
	StateHeld State = "held"
)

// States lists every message state, in lifecycle order.
var States = []State{StateQueued, StateScheduled, StateDeferred, StateHeld, StateSending, StateSent,
	StateDelivered, StateRead, StateFailed, StateSkippedOptOut, StateCancelled}

// Cancellable lists the states a cancel moves to cancelled: not yet handed
// to the provider.
var Cancellable = []State{StateQueued, StateScheduled, StateDeferred, StateHeld}

// Terminal reports whether a message in state s is done for the dispatcher.
func (s State) Terminal() bool {
	switch s {
	case StateSent, StateDelivered, StateRead, StateFailed, StateSkippedOptOut, StateCancelled:
		return true
	}
	return false
}

// Moves are the state changes the record makes (from -> to), as the
// package documentation lists them; a message is created queued,
// scheduled, failed, sending or skipped_opt_out. The tests hold every
// statement to it.
var Moves = map[State][]State{
	StateQueued:    {StateDeferred, StateSending, StateSkippedOptOut, StateCancelled, StateSent, StateFailed, StateHeld},
	StateScheduled: {StateDeferred, StateSending, StateSkippedOptOut, StateCancelled, StateHeld, StateFailed},
	StateDeferred:  {StateDeferred, StateSending, StateSkippedOptOut, StateCancelled, StateHeld, StateFailed},
	StateSending:   {StateSent, StateFailed, StateQueued, StateCancelled, StateHeld},
	StateHeld:      {StateQueued, StateFailed, StateCancelled},
	StateSent:      {StateDelivered, StateRead, StateFailed},
	StateFailed:    {StateDelivered, StateRead, StateHeld},
	StateDelivered: {StateRead},
	StateCancelled: {StateSent},
}

// CanMove reports whether the record ever moves a message from one state to
// another.
func CanMove(from, to State) bool {
	for _, s := range Moves[from] {
		if s == to {
			return true
		}
	}
	return false
}

// BatchState is a batch's status (the batch_status enum).
type BatchState string

// Batch statuses; see the package documentation.
const (
	BatchAccepted   BatchState = "accepted"
	BatchScheduled  BatchState = "scheduled"
	BatchProcessing BatchState = "processing"
	BatchCompleted  BatchState = "completed"
	BatchFailed     BatchState = "failed"
	BatchCancelled  BatchState = "cancelled"
)

// BatchStates lists every batch status, in lifecycle order.
var BatchStates = []BatchState{BatchAccepted, BatchScheduled, BatchProcessing, BatchCompleted, BatchFailed, BatchCancelled}

// Lane is which dispatcher sends a message (messages.lane).
type Lane string

// The two lanes. Campaign messages respect opt-out and delivery hours unless
// forced; automation messages bypass both.
const (
	LaneCampaign   Lane = "campaign"
	LaneAutomation Lane = "automation"
)

// ErrNotFound is a batch that does not exist for the asking company (or an
// id that is not a batch id).
var ErrNotFound = errors.New("not found")

// CodeUserStoppedMarketing is the provider's refusal of a marketing message
// to a user who stopped the business's marketing messages: the message
// fails and its contact is opted out of campaigns (reason provider).
const CodeUserStoppedMarketing = 131050

// DB is what the package's queries run on: a pool or a transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// TxDB is a DB that can begin a transaction: a pool or a connection.
type TxDB interface {
	DB
	Begin(ctx context.Context) (pgx.Tx, error)
}

// optional is nil for the zero value, else a pointer to v (a NULL column).
func optional[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}
