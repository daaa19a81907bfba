package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/store"
	"github.com/parleyhq/parley/testkit/storetest"
)

func TestWeek(t *testing.T) {
	for in, want := range map[string]string{
		"2026-11-29T23:59:00+05:00": "2026-11-23", // a Sunday evening east of UTC: still Sunday in UTC
		"2026-11-30T00:00:00Z":      "2026-11-30", // Monday
		"2026-12-06T23:59:59Z":      "2026-11-30",
		"2026-11-29T22:00:00-03:00": "2026-11-30", // Monday 01:00 UTC
	} {
		at, err := time.Parse(time.RFC3339, in)
		if err != nil {
			t.Fatal(err)
		}
		if got := store.Week(at).Format(time.DateOnly); got != want {
			t.Errorf("Week(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestWeeklyPartitions: the weeks are created ahead once (a second run
// creates nothing), a row of a week without a partition goes to the
// default one, and DropExpired drops whole expired weeks (with the
// partitions of their With tables) but keeps a week that still holds an
// open row, until it no longer does.
func TestWeeklyPartitions(t *testing.T) {
	ctx := context.Background()
	_, pool := storetest.NewDatabase(t)
	for _, q := range []string{
		`CREATE TABLE things (id bigint NOT NULL, at timestamptz NOT NULL, open boolean NOT NULL DEFAULT false,
			PRIMARY KEY (id, at)) PARTITION BY RANGE (at)`,
		`CREATE TABLE things_legacy PARTITION OF things FOR VALUES FROM (MINVALUE) TO ('2026-01-05T00:00:00Z')`,
		`CREATE TABLE things_default PARTITION OF things DEFAULT`,
		`CREATE TABLE notes (thing bigint NOT NULL, at timestamptz NOT NULL) PARTITION BY RANGE (at)`,
		`CREATE TABLE notes_legacy PARTITION OF notes FOR VALUES FROM (MINVALUE) TO ('2026-01-05T00:00:00Z')`,
		`CREATE TABLE notes_default PARTITION OF notes DEFAULT`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Date(2026, 1, 7, 12, 0, 0, 0, time.UTC) // a Wednesday
	for _, table := range []string{"things", "notes"} {
		created, err := store.CreateWeeks(ctx, pool, table, start, 3)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{table + "_w20260105", table + "_w20260112", table + "_w20260119", table + "_w20260126"}
		if !slices.Equal(created, want) {
			t.Fatalf("created %v, want %v", created, want)
		}
	}
	again, err := store.CreateWeeks(ctx, pool, "things", start.Add(24*time.Hour), 3)
	if err != nil || len(again) != 0 {
		t.Fatalf("second run created %v (%v), want none", again, err)
	}
	// A week before the legacy partition's end is the legacy partition's.
	if early, err := store.CreateWeeks(ctx, pool, "things", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 0); err != nil || len(early) != 0 {
		t.Fatalf("a week the legacy partition covers: created %v (%v)", early, err)
	}

	for _, q := range []string{
		`INSERT INTO things (id, at, open) VALUES (1, '2025-12-01', false), (2, '2026-01-06', false),
			(3, '2026-01-13', true), (4, '2026-01-20', false), (5, '2027-06-01', false)`,
		`INSERT INTO notes (thing, at) VALUES (1, '2025-12-01'), (2, '2026-01-06'), (3, '2026-01-13'), (4, '2026-01-20')`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var inDefault int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM things_default`).Scan(&inDefault); err != nil || inDefault != 1 {
		t.Fatalf("rows in things_default: %d (%v), want the one of 2027", inDefault, err)
	}

	e := store.Expiring{Parent: "things", Open: "open", With: []string{"notes"}}
	cutoff := time.Date(2026, 1, 19, 0, 0, 0, 0, time.UTC) // the weeks of 5 and 12 January have ended
	dropped, open, err := store.DropExpired(ctx, pool, e, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"things_legacy", "things_w20260105"}; !slices.Equal(dropped, want) {
		t.Errorf("dropped %v, want %v", dropped, want)
	}
	if want := []string{"things_w20260112"}; !slices.Equal(open, want) {
		t.Errorf("kept open %v, want %v", open, want)
	}
	ids := func(table string) []int64 {
		rows, err := pool.Query(ctx, `SELECT `+map[string]string{"things": "id", "notes": "thing"}[table]+` FROM `+table+` ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			out = append(out, id)
		}
		return out
	}
	if got := ids("things"); !slices.Equal(got, []int64{3, 4, 5}) {
		t.Errorf("things left: %v, want 3, 4, 5", got)
	}
	if got := ids("notes"); !slices.Equal(got, []int64{3, 4}) {
		t.Errorf("notes left: %v, want 3, 4 (their weeks' partitions went with things')", got)
	}

	// Once closed, the week goes at the next run.
	if _, err := pool.Exec(ctx, `UPDATE things SET open = false WHERE id = 3`); err != nil {
		t.Fatal(err)
	}
	dropped, open, err = store.DropExpired(ctx, pool, e, cutoff)
	if err != nil || !slices.Equal(dropped, []string{"things_w20260112"}) || len(open) != 0 {
		t.Fatalf("second drop: dropped %v, open %v (%v), want things_w20260112", dropped, open, err)
	}
	parts, err := store.Partitions(ctx, pool, "things")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range parts {
		names = append(names, p.Name)
	}
	if want := []string{"things_w20260119", "things_w20260126", "things_default"}; !slices.Equal(names, want) {
		t.Errorf("partitions left %v, want %v", names, want)
	}
}
