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

// TestRecordPartitionsUpgrade: migration 00018 over messages and inbound
// messages written before it, one of six weeks ago and one of this week.
// They become the legacy partitions, which end at the Monday after the
// newest row (so the one of this week fits); the weeks after it are
// partitions of their own; the ids go on from the messages' sequence (the
// inbound messages' too); a second expansion of the same (batch, seq,
// created_at) is caught by the unique key.
func TestRecordPartitionsUpgrade(t *testing.T) {
	ctx := context.Background()
	url := storetest.NewEmptyDatabase(t)
	if err := store.MigrateUpTo(ctx, url, 17); err != nil {
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
	old := now.Add(-42 * 24 * time.Hour)
	var company, account int64
	if err := pool.QueryRow(ctx, `INSERT INTO companies (slug, name) VALUES ('acme', 'Acme') RETURNING id`).Scan(&company); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `INSERT INTO messaging_accounts (company_id, name, phone_number_id, access_token_encrypted)
		VALUES ($1, 'Main', '15550001', '\x00') RETURNING id`, company).Scan(&account); err != nil {
		t.Fatal(err)
	}
	exec(`INSERT INTO batches (id, company_id, kind, source, contact_count, accepted_at) VALUES
		('019ab7c2-0000-7000-8000-000000000001', $1, 'campaign', 'api', 1, $2),
		('019ab7c2-0000-7000-8000-000000000002', $1, 'campaign', 'api', 1, $3)`, company, old, now)
	exec(`INSERT INTO messages (batch_id, seq, company_id, phone, state, created_at) VALUES
		('019ab7c2-0000-7000-8000-000000000001', 0, $1, '+15550100001', 'read', $2),
		('019ab7c2-0000-7000-8000-000000000002', 0, $1, '+15550100002', 'queued', $3)`, company, old, now)
	exec(`INSERT INTO inbound_messages (company_id, messaging_account_id, phone, wamid, type, sent_at) VALUES
		($1, $2, '+15550100001', 'wamid.a', 'text', $3), ($1, $2, '+15550100002', 'wamid.b', 'text', $4)`,
		company, account, old, now)
	var lastID int64
	if err := pool.QueryRow(ctx, `SELECT max(id) FROM (SELECT id FROM messages UNION ALL SELECT id FROM inbound_messages) x`).Scan(&lastID); err != nil {
		t.Fatal(err)
	}

	if _, err := store.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}

	legacyEnd := store.Week(now).AddDate(0, 0, 7)
	for _, table := range []string{"messages", "inbound_messages"} {
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
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+table+`_legacy`).Scan(&n); err != nil || n != 2 {
			t.Fatalf("%s_legacy holds %d rows (%v), want both", table, n, err)
		}
	}
	var msgID, inID int64
	if err := pool.QueryRow(ctx, `INSERT INTO messages (batch_id, seq, company_id, phone, created_at)
		VALUES ('019ab7c2-0000-7000-8000-000000000002', 1, $1, '+15550100003', $2) RETURNING id`, company, now).Scan(&msgID); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `INSERT INTO inbound_messages (company_id, messaging_account_id, phone, wamid, type, sent_at)
		VALUES ($1, $2, '+15550100003', 'wamid.c', 'text', $3) RETURNING id`, company, account, now).Scan(&inID); err != nil {
		t.Fatal(err)
	}
	if msgID <= lastID || inID <= msgID {
		t.Errorf("ids after the upgrade: message %d, inbound %d; want both after %d, from one sequence", msgID, inID, lastID)
	}
	tag, err := pool.Exec(ctx, `INSERT INTO messages (batch_id, seq, company_id, phone, created_at)
		VALUES ('019ab7c2-0000-7000-8000-000000000002', 1, $1, '+15550100003', $2)
		ON CONFLICT (batch_id, seq, created_at) DO NOTHING`, company, now)
	if err != nil || tag.RowsAffected() != 0 {
		t.Errorf("a second expansion of the same message: %v rows, %v; want none", tag.RowsAffected(), err)
	}
}
