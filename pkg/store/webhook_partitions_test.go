package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/pkg/store"
	"github.com/parleyhq/parley/testkit/storetest"
)

// TestWebhookPartitionsUpgrade: migration 00019 over deliveries and
// attempts written before it, one of six weeks ago and one of this week.
// They become the legacy partitions of both tables, which end together at
// the Monday after the newest delivery (so the one of this week fits);
// the weeks after it are partitions of their own; each attempt carries its
// delivery's created_at; the ids go on from their sequences; an insertion
// of the same (endpoint, event, created_at) is caught by the unique key;
// and the legacy weeks go together once past the retention with nothing
// pending, which no foreign key stops.
func TestWebhookPartitionsUpgrade(t *testing.T) {
	ctx := context.Background()
	url := storetest.NewEmptyDatabase(t)
	if err := store.MigrateUpTo(ctx, url, 18); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	now := time.Now().UTC()
	var company int64
	var endpoint string
	if err := pool.QueryRow(ctx, `INSERT INTO companies (slug, name) VALUES ('acme', 'Acme') RETURNING id`).Scan(&company); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `INSERT INTO webhook_endpoints (company_id, url) VALUES ($1, 'https://hooks.example.com/') RETURNING id::text`,
		company).Scan(&endpoint); err != nil {
		t.Fatal(err)
	}
	exec(`INSERT INTO webhook_deliveries (endpoint_id, company_id, event_id, event_type, payload, status, created_at) VALUES
		($1, $2, '019ab7c2-0000-7000-8000-000000000001', 'message.sent', '{}', 'succeeded', $3),
		($1, $2, '019ab7c2-0000-7000-8000-000000000002', 'message.sent', '{}', 'pending', $4)`,
		endpoint, company, now.Add(-42*24*time.Hour), now)
	exec(`INSERT INTO webhook_attempts (delivery_id, endpoint_id, event_id, event_type, status)
		SELECT id, endpoint_id, event_id, event_type, 'failed' FROM webhook_deliveries`)

	if _, err := store.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}

	legacyEnd := store.Week(now).AddDate(0, 0, 7)
	for _, table := range []string{"webhook_deliveries", "webhook_attempts"} {
		parts, err := store.Partitions(ctx, pool, table)
		if err != nil {
			t.Fatal(err)
		}
		want := []store.Partition{
			{Name: table + "_legacy", End: legacyEnd},
			{Name: table + "_w" + legacyEnd.Format("20060102"), End: legacyEnd.AddDate(0, 0, 7)},
			{Name: table + "_w" + legacyEnd.AddDate(0, 0, 7).Format("20060102"), End: legacyEnd.AddDate(0, 0, 14)},
			{Name: table + "_default"},
		}
		if !slices.EqualFunc(parts, want, func(a, b store.Partition) bool { return a.Name == b.Name && a.End.Equal(b.End) }) {
			t.Fatalf("partitions of %s: %v, want %v", table, parts, want)
		}
	}
	count := func(q string, args ...any) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	if n := count(`SELECT count(*) FROM webhook_attempts a JOIN webhook_deliveries d
		ON d.id = a.delivery_id AND d.created_at = a.delivery_created_at
		WHERE a.tableoid = 'webhook_attempts_legacy'::regclass AND d.tableoid = 'webhook_deliveries_legacy'::regclass`); n != 2 {
		t.Fatalf("%d attempts in the legacy partition with their delivery's created_at, want 2", n)
	}

	// New rows take ids after the old ones, and a repeat is caught.
	insert := `INSERT INTO webhook_deliveries (endpoint_id, company_id, event_id, event_type, payload, created_at)
		VALUES ($1, $2, '019ab7c2-0000-7000-8000-000000000003', 'message.sent', '{}', $3)
		ON CONFLICT (endpoint_id, event_id, created_at) DO NOTHING`
	exec(insert, endpoint, company, now)
	exec(insert, endpoint, company, now)
	if n := count(`SELECT count(*) FROM webhook_deliveries WHERE id = 3`); n != 1 {
		t.Fatalf("%d deliveries with id 3 (the next of the sequence), want 1", n)
	}
	exec(`INSERT INTO webhook_attempts (delivery_id, delivery_created_at, endpoint_id, event_id, event_type, status)
		VALUES (3, $1, $2, '019ab7c2-0000-7000-8000-000000000003', 'message.sent', 'succeeded')`, now, endpoint)
	if n := count(`SELECT count(*) FROM webhook_attempts WHERE id = 3`); n != 1 {
		t.Fatalf("%d attempts with id 3 (the next of the sequence), want 1", n)
	}

	e := store.Expiring{Parent: "webhook_deliveries", Open: `status = 'pending'`, With: []string{"webhook_attempts"}}
	dropped, open, err := store.DropExpired(ctx, pool, e, legacyEnd)
	if err != nil || len(dropped) != 0 || !slices.Equal(open, []string{"webhook_deliveries_legacy"}) {
		t.Fatalf("with a pending delivery: dropped %v, open %v (%v); want the legacy partition kept open", dropped, open, err)
	}
	exec(`UPDATE webhook_deliveries SET status = 'succeeded'`)
	dropped, open, err = store.DropExpired(ctx, pool, e, legacyEnd)
	if err != nil || !slices.Equal(dropped, []string{"webhook_deliveries_legacy"}) || len(open) != 0 {
		t.Fatalf("with nothing pending: dropped %v, open %v (%v); want the legacy partition", dropped, open, err)
	}
	if n := count(`SELECT (SELECT count(*) FROM webhook_deliveries) + (SELECT count(*) FROM webhook_attempts)`); n != 0 {
		t.Fatalf("%d rows left after the legacy weeks went, want none", n)
	}
	if n := count(`SELECT count(*) FROM pg_class WHERE relname = 'webhook_attempts_legacy'`); n != 0 {
		t.Fatal("webhook_attempts_legacy is still there")
	}
}
