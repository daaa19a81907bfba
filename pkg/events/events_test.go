package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/pkg/events"
	"github.com/parleyhq/parley/testkit/storetest"
)

func TestAppendCommitsWithItsTransaction(t *testing.T) {
	ctx := context.Background()
	_, pool := storetest.NewDatabase(t)
	var company int64
	if err := pool.QueryRow(ctx, `INSERT INTO companies (slug, name) VALUES ('acme', 'Acme') RETURNING id`).Scan(&company); err != nil {
		t.Fatal(err)
	}
	storetest.Subscribe(t, pool, company)
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	sent := events.Event{CompanyID: company, Type: events.MessageSent, At: at,
		Data: events.Message{BatchID: "019ab7c2-0000-7000-8000-000000000001", MessageID: 7, Phone: "+393331234567",
			State: "sent", ProviderMessageID: "wamid.X", ChangedAt: at}}
	failed := events.Event{ID: "019ab7c2-0000-7000-8000-0000000000ff", CompanyID: company, Type: events.MessageFailed, At: at,
		Data: events.Message{BatchID: "019ab7c2-0000-7000-8000-000000000001", MessageID: 8, Phone: "+14155550100",
			State: "failed", Error: &events.Error{Code: 131026, Title: "Message undeliverable"}, ChangedAt: at}}

	// A rolled-back change leaves no event.
	rollback := errors.New("roll back")
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := events.Append(ctx, tx, sent); err != nil {
			return err
		}
		return rollback
	})
	if !errors.Is(err, rollback) {
		t.Fatalf("BeginFunc = %v", err)
	}
	if n := count(t, pool); n != 0 {
		t.Fatalf("%d events after a rollback, want 0", n)
	}

	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return events.Append(ctx, tx, sent, failed) }); err != nil {
		t.Fatalf("append: %v", err)
	}
	rows, err := pool.Query(ctx, `SELECT id::text, company_id, type, occurred_at, data FROM event_outbox ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		ID      string
		Company int64
		Type    string
		At      time.Time
		Data    map[string]any
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d events, want 2", len(got))
	}
	if got[0].Type != "message.sent" || got[1].Type != "message.failed" || got[1].ID != failed.ID || got[0].ID == "" {
		t.Fatalf("events = %+v", got)
	}
	if !got[0].At.Equal(at) || got[0].Company != company {
		t.Fatalf("first event = %+v", got[0])
	}
	b, _ := json.Marshal(got[1].Data)
	want := `{"batch_id":"019ab7c2-0000-7000-8000-000000000001","changed_at":"2026-11-24T10:00:00Z","error":{"code":131026,"title":"Message undeliverable"},"message_id":8,"phone":"+14155550100","state":"failed"}`
	if string(b) != want {
		t.Fatalf("data = %s\nwant   %s", b, want)
	}
}

func TestAppendRefusesUnknownType(t *testing.T) {
	err := events.Append(context.Background(), nil, events.Event{Type: "message.exploded"})
	if err == nil {
		t.Fatal("Append accepted an unknown type")
	}
}

// TestAppendWritesWhatEndpointsReceive: an event is written when an
// enabled endpoint of its company receives its type (an empty filter is
// every type), and only then: not for a company without endpoints, nor
// for a disabled endpoint, nor for a type no endpoint subscribes to.
func TestAppendWritesWhatEndpointsReceive(t *testing.T) {
	ctx := context.Background()
	_, pool := storetest.NewDatabase(t)
	company := func(slug string) int64 {
		var id int64
		if err := pool.QueryRow(ctx, `INSERT INTO companies (slug, name) VALUES ($1, $1) RETURNING id`, slug).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	none, batches, both, every, disabled := company("none"), company("batches"), company("both"), company("every"), company("disabled")
	storetest.Subscribe(t, pool, batches, "batch.completed")
	storetest.Subscribe(t, pool, both, "batch.completed")
	storetest.Subscribe(t, pool, both, "message.sent")
	storetest.Subscribe(t, pool, every)
	storetest.Subscribe(t, pool, disabled)
	if _, err := pool.Exec(ctx, `UPDATE webhook_endpoints SET enabled = false WHERE company_id = $1`, disabled); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	var evs []events.Event
	for _, c := range []int64{none, batches, both, every, disabled} {
		for _, typ := range []events.Type{events.MessageSent, events.MessageFailed, events.BatchCompleted} {
			evs = append(evs, events.Event{CompanyID: c, Type: typ, At: at, Data: events.Batch{BatchID: "b", Status: "completed", ChangedAt: at}})
		}
	}
	if err := events.Append(ctx, pool, evs...); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `SELECT company_id, type FROM event_outbox ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Company int64
		Type    string
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		t.Fatal(err)
	}
	want := []row{{batches, "batch.completed"}, {both, "message.sent"}, {both, "batch.completed"},
		{every, "message.sent"}, {every, "message.failed"}, {every, "batch.completed"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("outbox = %v\nwant     %v", got, want)
	}

	// Events nobody receives: nothing is written, and no error.
	if err := events.Append(ctx, pool, evs[0], evs[1]); err != nil {
		t.Fatal(err)
	}
	if n := count(t, pool); n != len(want) {
		t.Fatalf("%d events, want %d", n, len(want))
	}
}

func count(t *testing.T, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM event_outbox`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
