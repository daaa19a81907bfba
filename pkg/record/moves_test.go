package record_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/record"
)

// watchMoves installs, in the fixture's own database, a trigger that logs
// every change of a message's state, and returns what it logged.
func (f *fixture) watchMoves() func() map[string]int {
	f.t.Helper()
	if _, err := f.pool.Exec(f.ctx, `
		CREATE TABLE test_moves (from_state text, to_state text);
		CREATE FUNCTION test_log_move() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO test_moves VALUES (OLD.state::text, NEW.state::text);
			RETURN NEW;
		END $$;
		CREATE TRIGGER test_log_move AFTER UPDATE OF state ON messages
			FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION test_log_move();`); err != nil {
		f.t.Fatal(err)
	}
	return func() map[string]int {
		rows, err := f.pool.Query(f.ctx, `SELECT from_state, to_state, count(*) FROM test_moves GROUP BY 1, 2`)
		if err != nil {
			f.t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]int{}
		for rows.Next() {
			var from, to string
			var n int
			if err := rows.Scan(&from, &to, &n); err != nil {
				f.t.Fatal(err)
			}
			out[from+" -> "+to] = n
		}
		return out
	}
}

// TestEveryStatementMovesAlongMoves runs a message through every writer of
// the record (expansion, claim, outcomes of each kind, status callbacks in
// every order, cancel, defer, the lease) and holds each state change
// PostgreSQL saw to record.Moves: nothing moves backwards.
func TestEveryStatementMovesAlongMoves(t *testing.T) {
	f := newFixture(t)
	moves := f.watchMoves()
	lane, acct := record.LaneCampaign, f.camp.MessagingAccountID

	later := f.now.Add(time.Hour)
	f.expand(f.campaignBatch(2, &later)) // scheduled
	f.expand(f.campaignBatch(6, nil))    // queued
	claimed, err := record.Claim(f.ctx, f.pool, lane, acct, 6, f.now, false)
	if err != nil || len(claimed) != 6 {
		t.Fatalf("claim: %d, %v", len(claimed), err)
	}
	outcome := func(i int, kind record.OutcomeKind, code int) record.Outcome {
		c := claimed[i]
		return record.Outcome{Kind: kind, ID: c.ID, BatchID: c.BatchID, ClaimedAt: c.ClaimedAt, Code: code,
			Wamid: fmt.Sprintf("wamid.moves.%d", c.ID), NotBefore: f.now, At: f.now, Title: "x"}
	}
	outs := []record.Outcome{outcome(0, record.OutcomeSent, 0), outcome(1, record.OutcomeSent, 0),
		outcome(2, record.OutcomeFailed, 131026), outcome(3, record.OutcomeRetry, 130429), outcome(4, record.OutcomeRelease, 0)}
	for i := range outs[2:] {
		outs[2+i].Wamid = ""
	}
	if _, err := record.RecordOutcomes(f.ctx, f.pool, outs, f.now); err != nil {
		t.Fatal(err)
	}
	// Statuses in every order: read before delivered, failed after
	// delivered (ignored), delivered after failed (wins).
	st := func(i int, s whatsapp.Status) whatsapp.StatusUpdate {
		u := whatsapp.StatusUpdate{MessageID: fmt.Sprintf("wamid.moves.%d", claimed[i].ID), Status: s, Timestamp: f.now}
		if s == whatsapp.StatusFailed {
			u.Errors = []whatsapp.StatusError{{Code: 131026, Title: "Message undeliverable"}}
		}
		return u
	}
	for _, batch := range [][]whatsapp.StatusUpdate{
		{st(0, whatsapp.StatusRead)}, {st(0, whatsapp.StatusDelivered)}, {st(0, whatsapp.StatusFailed)},
		{st(1, whatsapp.StatusFailed)}, {st(1, whatsapp.StatusDelivered)}, {st(1, whatsapp.StatusSent)},
	} {
		if _, err := record.ApplyStatuses(f.ctx, f.pool, batch, f.now); err != nil {
			t.Fatal(err)
		}
	}
	// The claim left in sending goes back by the lease; what waits is
	// deferred, then cancelled.
	if n, err := record.ReturnStale(f.ctx, f.pool, lane, f.now.Add(time.Minute), f.now.Add(time.Second), 8); err != nil || n != 1 {
		t.Fatalf("lease: %d, %v", n, err)
	}
	if _, err := record.Defer(f.ctx, f.pool, acct, f.now.Add(2*time.Hour), f.now.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, id := range f.batches() {
		if _, err := record.CancelAt(f.ctx, f.pool, f.comp.ID, id, f.now.Add(3*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}

	// Every writer counted what it changed (pkg/record's reports).
	if n := f.countersMatchRecord(); n == 0 {
		t.Error("no report counters")
	}
	seen := moves()
	for move, n := range seen {
		var from, to record.State
		fmt.Sscanf(move, "%s -> %s", &from, &to)
		if !record.CanMove(from, to) {
			t.Errorf("%d message(s) moved %s, which record.Moves does not allow", n, move)
		}
	}
	// The walk above makes at least these moves; fewer means the trigger or
	// the walk went wrong, and the check above proved nothing.
	for _, want := range []string{"queued -> sending", "sending -> sent", "sending -> failed", "sending -> queued",
		"sent -> read", "sent -> failed", "failed -> delivered", "queued -> deferred", "deferred -> cancelled",
		"scheduled -> deferred"} {
		if seen[want] == 0 {
			t.Errorf("no message moved %s; moves seen: %v", want, seen)
		}
	}
}

// batches lists the fixture company's batch ids.
func (f *fixture) batches() []string {
	f.t.Helper()
	rows, err := f.pool.Query(f.ctx, `SELECT id::text FROM batches WHERE company_id = $1`, f.comp.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, id)
	}
	return out
}

// TestCanMoveIsTheTable: the moves the documentation names are allowed,
// backwards ones are not.
func TestCanMoveIsTheTable(t *testing.T) {
	for _, c := range []struct {
		from, to record.State
		ok       bool
	}{
		{record.StateQueued, record.StateSending, true},
		{record.StateSent, record.StateDelivered, true},
		{record.StateFailed, record.StateRead, true},
		{record.StateRead, record.StateDelivered, false},
		{record.StateDelivered, record.StateFailed, false},
		{record.StateSent, record.StateSending, false},
		{record.StateSkippedOptOut, record.StateSending, false},
		{record.StateCancelled, record.StateQueued, false},
	} {
		if got := record.CanMove(c.from, c.to); got != c.ok {
			t.Errorf("CanMove(%s, %s) = %v, want %v", c.from, c.to, got, c.ok)
		}
	}
}
