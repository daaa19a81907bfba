package record_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/delivery"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/testkit/storetest"
)

type fixture struct {
	t     *testing.T
	ctx   context.Context
	pool  *pgxpool.Pool
	cat   *catalog.Store
	now   time.Time
	exp   *delivery.Expander
	comp  catalog.Company
	other catalog.Company
	camp  catalog.Campaign
	auto  catalog.Automation
}

var seq atomic.Int64

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	_, pool := storetest.NewDatabase(t)
	box, err := secretbox.New(secretbox.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, ctx: ctx, pool: pool, cat: catalog.NewStore(pool, box), now: time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC)}
	f.exp = delivery.NewExpander(pool, f.cat, func() time.Time { return f.now })
	company := func(slug string) catalog.Company {
		c, err := f.cat.CreateCompany(ctx, catalog.NewCompany{Slug: fmt.Sprintf("%s-%d", slug, seq.Add(1)), Name: slug,
			SubscriptionActive: true, Provisioned: true})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	f.comp, f.other = company("acme"), company("globex")
	storetest.Subscribe(t, pool, f.comp.ID) // its changes write their events
	acct, err := f.cat.CreateMessagingAccount(ctx, catalog.NewMessagingAccount{CompanyID: f.comp.ID, Name: "main",
		PhoneNumberID: fmt.Sprintf("77%09d", seq.Add(1)), AccessToken: "test-token-0123456789", Connected: true,
		Timezone: "UTC", ThroughputPerSecond: 80})
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := f.cat.CreateTemplate(ctx, catalog.NewTemplate{CompanyID: f.comp.ID, Template: whatsapp.Template{Name: "hello", Language: "en_US"}})
	if err != nil {
		t.Fatal(err)
	}
	if f.camp, err = f.cat.CreateCampaign(ctx, f.comp.ID, "Summer", tpl.ID, acct.ID); err != nil {
		t.Fatal(err)
	}
	if f.auto, err = f.cat.CreateAutomation(ctx, catalog.NewAutomation{CompanyID: f.comp.ID, Name: "Shipped", Active: true,
		TemplateID: &tpl.ID, MessagingAccountID: &acct.ID}); err != nil {
		t.Fatal(err)
	}
	return f
}

func phones(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("+1415555%04d", i)
	}
	return out
}

func (f *fixture) campaignBatch(n int, scheduledAt *time.Time) *sendsv1.CampaignBatch {
	id, _ := uuid.NewV7()
	b := &sendsv1.CampaignBatch{BatchId: id.String(), CompanyId: f.comp.ID, CampaignId: f.camp.ID, Phones: phones(n),
		AcceptedAt: timestamppb.New(f.now), Source: "api:campaigns_send"}
	if scheduledAt != nil {
		b.ScheduledAt = timestamppb.New(*scheduledAt)
	}
	return b
}

func (f *fixture) expand(b *sendsv1.CampaignBatch) {
	f.t.Helper()
	if _, err := f.exp.Campaign(f.ctx, b); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) states(batchID string) map[string]int {
	f.t.Helper()
	rows, err := f.pool.Query(f.ctx, `SELECT state::text, count(*) FROM messages WHERE batch_id = $1 GROUP BY 1`, batchID)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			f.t.Fatal(err)
		}
		out[s] = n
	}
	return out
}

func TestCancelScheduledBatch(t *testing.T) {
	f := newFixture(t)
	at := f.now.Add(time.Hour)
	b := f.campaignBatch(5, &at)
	f.expand(b)
	// One message is already with a dispatcher, one was sent: both stay.
	if _, err := f.pool.Exec(f.ctx, `UPDATE messages SET state = 'sending', claimed_at = $2 WHERE batch_id = $1 AND seq = 0`, b.BatchId, f.now); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(f.ctx, `UPDATE messages SET state = 'sent', sent_at = $2, provider_message_id = 'wamid.x' WHERE batch_id = $1 AND seq = 1`, b.BatchId, f.now); err != nil {
		t.Fatal(err)
	}

	if _, err := record.Cancel(f.ctx, f.pool, f.other.ID, b.BatchId); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("another company's cancel: %v, want ErrNotFound", err)
	}
	if got := f.states(b.BatchId); got["scheduled"] != 3 {
		t.Fatalf("another company's cancel changed messages: %v", got)
	}

	res, err := record.CancelAt(f.ctx, f.pool, f.comp.ID, b.BatchId, f.now)
	if err != nil {
		t.Fatal(err)
	}
	if res.Cancelled != 3 || res.Counts[record.StateCancelled] != 3 || res.Counts[record.StateSending] != 1 ||
		res.Counts[record.StateSent] != 1 || res.Status != record.BatchProcessing || res.CancelledAt == nil {
		t.Fatalf("first cancel: %+v", res)
	}
	var events int
	if err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM event_outbox WHERE type = 'batch.cancelled' AND data->>'batch_id' = $1`, b.BatchId).Scan(&events); err != nil || events != 1 {
		t.Fatalf("batch.cancelled events: %d, %v", events, err)
	}

	again, err := record.CancelAt(f.ctx, f.pool, f.comp.ID, b.BatchId, f.now)
	if err != nil || again.Cancelled != 0 || again.Counts[record.StateCancelled] != 3 {
		t.Fatalf("second cancel: %+v, %v", again, err)
	}

	// The message in flight comes back for a retry: it is cancelled as
	// that is recorded, and the batch, having sent one, completes.
	tx, err := f.pool.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(f.ctx, `UPDATE messages SET state = 'queued' WHERE batch_id = $1 AND seq = 0`, b.BatchId); err != nil {
		t.Fatal(err)
	}
	if err := record.CompleteBatches(f.ctx, tx, []string{b.BatchId}, f.now); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(f.ctx); err != nil {
		t.Fatal(err)
	}
	st, err := record.BatchStatus(f.ctx, f.pool, f.comp.ID, b.BatchId)
	if err != nil || st.Status != record.BatchCompleted || st.Counts[record.StateCancelled] != 4 || st.Counts[record.StateSent] != 1 {
		t.Fatalf("after the retry came back: %+v, %v", st, err)
	}
}

func TestCancelNothingSentIsCancelled(t *testing.T) {
	f := newFixture(t)
	b := f.campaignBatch(4, nil)
	f.expand(b)
	res, err := record.CancelAt(f.ctx, f.pool, f.comp.ID, b.BatchId, f.now)
	if err != nil || res.Cancelled != 4 || res.Status != record.BatchCancelled || res.CompletedAt == nil {
		t.Fatalf("cancel: %+v, %v", res, err)
	}
	if _, err := record.Cancel(f.ctx, f.pool, f.comp.ID, "not-a-uuid"); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("malformed id: %v", err)
	}
	id, _ := uuid.NewV7()
	if _, err := record.Cancel(f.ctx, f.pool, f.comp.ID, id.String()); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
}

func TestCancelPendingThenExpand(t *testing.T) {
	f := newFixture(t)
	b := f.campaignBatch(6, nil)
	pending := record.Batch{ID: b.BatchId, CompanyID: f.comp.ID, Kind: "campaign", Source: bus.ParseSource(b.Source), ContactCount: 6, AcceptedAt: f.now}
	res, err := record.CancelPending(f.ctx, f.pool, pending, f.now)
	if err != nil || res.Cancelled != 6 || res.Status != record.BatchCancelled || res.Counts[record.StateCancelled] != 6 {
		t.Fatalf("pending cancel: %+v, %v", res, err)
	}
	again, err := record.CancelPending(f.ctx, f.pool, pending, f.now)
	if err != nil || again.Cancelled != 0 || again.Counts[record.StateCancelled] != 6 {
		t.Fatalf("second pending cancel: %+v, %v", again, err)
	}
	// The dispatcher gets to it: every message is created cancelled, none due.
	exp, err := f.exp.Campaign(f.ctx, b)
	if err != nil || exp.Due || exp.Messages != 6 {
		t.Fatalf("expand: %+v, %v", exp, err)
	}
	if got := f.states(b.BatchId); got["cancelled"] != 6 || len(got) != 1 {
		t.Fatalf("states after expansion: %v", got)
	}
	st, err := record.BatchStatus(f.ctx, f.pool, f.comp.ID, b.BatchId)
	if err != nil || st.Status != record.BatchCancelled || st.Counts[record.StateCancelled] != 6 {
		t.Fatalf("status: %+v, %v", st, err)
	}
	var campaign *int64
	if err := f.pool.QueryRow(f.ctx, `SELECT campaign_id FROM batches WHERE id = $1`, b.BatchId).Scan(&campaign); err != nil || campaign == nil || *campaign != f.camp.ID {
		t.Fatalf("campaign of the batch: %v, %v", campaign, err)
	}
	// A redelivery changes nothing.
	if exp, err := f.exp.Campaign(f.ctx, b); err != nil || exp.Result != delivery.ResultRedelivered {
		t.Fatalf("redelivery: %+v, %v", exp, err)
	}
}

func TestMessagesPagesWhileStatesChange(t *testing.T) {
	f := newFixture(t)
	b := f.campaignBatch(25, nil)
	f.expand(b)
	if _, err := record.Messages(f.ctx, f.pool, f.other.ID, b.BatchId, record.Filter{}); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("another company's batch: %v", err)
	}
	for _, bad := range []struct {
		f     record.Filter
		field string
	}{
		{record.Filter{Limit: -1}, "limit"},
		{record.Filter{Limit: 1001}, "limit"},
		{record.Filter{States: []string{"sent", "lost"}}, "state"},
		{record.Filter{Cursor: "!!"}, "cursor"},
		{record.Filter{Cursor: "djE6eDox"}, "cursor"},
	} {
		var inv *record.InvalidError
		if _, err := record.Messages(f.ctx, f.pool, f.comp.ID, b.BatchId, bad.f); !errors.As(err, &inv) || inv.Field != bad.field {
			t.Fatalf("%+v: %v, want an invalid %s", bad.f, err, bad.field)
		}
	}

	seen := map[int]bool{}
	filter := record.Filter{States: []string{"queued"}, Limit: 10}
	page, err := record.Messages(f.ctx, f.pool, f.comp.ID, b.BatchId, filter)
	if err != nil || len(page.Messages) != 10 || page.NextCursor == nil {
		t.Fatalf("first page: %+v, %v", page, err)
	}
	for _, m := range page.Messages {
		seen[m.Seq] = true
	}
	// Between pages: messages already listed and messages not listed yet
	// leave the filter (sent); the rest must still come, each once.
	if _, err := f.pool.Exec(f.ctx, `UPDATE messages SET state = 'sent', sent_at = $2 WHERE batch_id = $1 AND seq IN (0, 1, 12, 13)`, b.BatchId, f.now); err != nil {
		t.Fatal(err)
	}
	for page.NextCursor != nil {
		filter.Cursor = *page.NextCursor
		if page, err = record.Messages(f.ctx, f.pool, f.comp.ID, b.BatchId, filter); err != nil {
			t.Fatal(err)
		}
		for _, m := range page.Messages {
			if seen[m.Seq] || m.State != record.StateQueued {
				t.Fatalf("message %d listed twice or in state %s", m.Seq, m.State)
			}
			seen[m.Seq] = true
		}
	}
	if len(seen) != 23 {
		t.Fatalf("listed %d messages, want 23 (25 but the two sent before they were reached)", len(seen))
	}

	all, err := record.Messages(f.ctx, f.pool, f.comp.ID, b.BatchId, record.Filter{States: []string{"sent"}})
	if err != nil || len(all.Messages) != 4 || all.NextCursor != nil {
		t.Fatalf("sent: %+v, %v", all, err)
	}
	m := all.Messages[0]
	if m.Phone != "+14155550000" || m.Times.Sent == nil || !m.Times.Sent.Equal(f.now) || m.Due != nil {
		t.Fatalf("sent message: %+v", m)
	}
	// A cursor of another batch is refused.
	other := f.campaignBatch(2, nil)
	f.expand(other)
	var inv *record.InvalidError
	if _, err := record.Messages(f.ctx, f.pool, f.comp.ID, other.BatchId, record.Filter{Cursor: filter.Cursor}); !errors.As(err, &inv) {
		t.Fatalf("foreign cursor: %v", err)
	}
}

// TestConcurrentCancels: cancels racing each other cancel every message
// once between them, and one of them records the batch.cancelled event.
func TestConcurrentCancels(t *testing.T) {
	f := newFixture(t)
	b := f.campaignBatch(200, nil)
	f.expand(b)
	const n = 8
	got := make(chan int, n)
	errs := make(chan error, n)
	for range n {
		go func() {
			res, err := record.CancelAt(f.ctx, f.pool, f.comp.ID, b.BatchId, f.now)
			errs <- err
			got <- res.Cancelled
		}()
	}
	total, nonzero := 0, 0
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		c := <-got
		total += c
		if c > 0 {
			nonzero++
		}
	}
	if total != 200 || nonzero != 1 {
		t.Fatalf("cancels counted %d in total, %d of them non-zero; want 200 by one", total, nonzero)
	}
	var events int
	if err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM event_outbox WHERE type = 'batch.cancelled'`).Scan(&events); err != nil || events != 1 {
		t.Fatalf("batch.cancelled events: %d, %v", events, err)
	}
}

// TestCancelPendingOfEveryKind: automation triggers and batch sends
// cancelled in the stream are expanded cancelled too.
func TestCancelPendingOfEveryKind(t *testing.T) {
	f := newFixture(t)
	newID := func() string { id, _ := uuid.NewV7(); return id.String() }
	auto := &sendsv1.AutomationBatch{BatchId: newID(), CompanyId: f.comp.ID, AutomationId: f.auto.ID,
		Contacts: []*sendsv1.AutomationContact{{Phone: "+14155550001"}, {Phone: "+14155550002"}}, AcceptedAt: timestamppb.New(f.now)}
	msgs := &sendsv1.MessageBatch{BatchId: newID(), CompanyId: f.comp.ID, AcceptedAt: timestamppb.New(f.now),
		Messages: []*sendsv1.BatchMessage{{Phone: "+14155550003", CampaignId: f.camp.ID}, {Phone: "+14155550004", CampaignId: 999999}}}
	for _, c := range []struct {
		id     string
		kind   bus.BatchKind
		n      int
		expand func() (delivery.Expansion, error)
	}{
		{auto.BatchId, "automation", 2, func() (delivery.Expansion, error) { return f.exp.Automation(f.ctx, auto) }},
		{msgs.BatchId, "batch", 2, func() (delivery.Expansion, error) { return f.exp.Messages(f.ctx, msgs) }},
	} {
		res, err := record.CancelPending(f.ctx, f.pool, record.Batch{ID: c.id, CompanyID: f.comp.ID, Kind: c.kind,
			Source: "api:test", ContactCount: c.n, AcceptedAt: f.now}, f.now)
		if err != nil || res.Cancelled != c.n {
			t.Fatalf("%s: %+v, %v", c.kind, res, err)
		}
		exp, err := c.expand()
		if err != nil || exp.Due {
			t.Fatalf("%s: expand %+v, %v", c.kind, exp, err)
		}
		st, err := record.BatchStatus(f.ctx, f.pool, f.comp.ID, c.id)
		if err != nil || st.Status != record.BatchCancelled {
			t.Fatalf("%s: %+v, %v", c.kind, st, err)
		}
		got := f.states(c.id)
		// The entry whose campaign does not exist fails, saying why; the
		// rest are cancelled.
		if c.kind == "batch" && (got["cancelled"] != 1 || got["failed"] != 1) || c.kind == "automation" && got["cancelled"] != 2 {
			t.Fatalf("%s: states %v", c.kind, got)
		}
	}
}
