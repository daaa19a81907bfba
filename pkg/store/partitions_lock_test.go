package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/store"
	"github.com/parleyhq/parley/testkit/storetest"
)

// TestDropExpiredWaitsForAWriterOfBothTables: a writer that changes a row of
// the parent table and then inserts into its With table (the webhook
// sender's recorder: a delivery, then its attempt) in one transaction is
// under way when a drop starts. The drop waits for it, without holding the
// With table meanwhile: the writer commits, and the drop goes through
// after it. (Locking the With table first made the two wait for each
// other until the drop's lock timeout or the deadlock check ended one.)
func TestDropExpiredWaitsForAWriterOfBothTables(t *testing.T) {
	ctx := context.Background()
	_, pool := storetest.NewDatabase(t)
	for _, q := range []string{
		`CREATE TABLE things (id bigint NOT NULL, at timestamptz NOT NULL, open boolean NOT NULL DEFAULT false,
			PRIMARY KEY (id, at)) PARTITION BY RANGE (at)`,
		`CREATE TABLE things_default PARTITION OF things DEFAULT`,
		`CREATE TABLE notes (thing bigint NOT NULL, at timestamptz NOT NULL) PARTITION BY RANGE (at)`,
		`CREATE TABLE notes_default PARTITION OF notes DEFAULT`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for _, table := range []string{"things", "notes"} {
		if _, err := store.CreateWeeks(ctx, pool, table, time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO things (id, at) VALUES (1, '2026-01-06'), (2, '2026-01-13')`); err != nil {
		t.Fatal(err)
	}

	writer, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Rollback(ctx) //nolint:errcheck
	if _, err := writer.Exec(ctx, `UPDATE things SET open = false WHERE id = 2 AND at = '2026-01-13'`); err != nil {
		t.Fatal(err)
	}
	type result struct {
		dropped []string
		err     error
	}
	done := make(chan result, 1)
	go func() {
		dropped, _, err := store.DropExpired(ctx, pool, store.Expiring{Parent: "things", Open: "open", With: []string{"notes"}},
			time.Date(2026, 1, 12, 0, 0, 0, 0, time.UTC))
		done <- result{dropped, err}
	}()
	// The drop is waiting for a lock the writer holds.
	deadline := time.Now().Add(5 * time.Second)
	for {
		var waiting bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted AND mode = 'AccessExclusiveLock')`).
			Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the drop never waited for the writer")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Well within store.DropLockTimeout and the deadlock check.
	insert, cancel := context.WithTimeout(ctx, store.DropLockTimeout/2)
	defer cancel()
	if _, err := writer.Exec(insert, `INSERT INTO notes (thing, at) VALUES (2, '2026-01-13')`); err != nil {
		t.Fatalf("the writer's second table, while the drop waits: %v", err)
	}
	if err := writer.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || !slices.Equal(r.dropped, []string{"things_w20260105"}) {
		t.Fatalf("drop after the writer: dropped %v (%v), want things_w20260105", r.dropped, r.err)
	}
	var notes int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM notes`).Scan(&notes); err != nil || notes != 1 {
		t.Fatalf("notes: %d (%v), want the writer's", notes, err)
	}
}
