package delivery

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/testkit/storetest"
)

// testClock is the injectable clock of a test. It stands still until Run
// makes it follow the wall clock (from wherever it was); Set and Advance
// move it in either mode.
type testClock struct {
	mu      sync.Mutex
	base    time.Time
	since   time.Time
	running bool
}

func newTestClock(t time.Time) *testClock { return &testClock{base: t} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running {
		return c.base.Add(time.Since(c.since))
	}
	return c.base
}

// Run makes the clock move with the wall clock from its current reading.
func (c *testClock) Run() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running {
		c.running, c.since = true, time.Now()
	}
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	c.base, c.since = t, time.Now()
	c.mu.Unlock()
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.base = c.base.Add(d)
	c.mu.Unlock()
}

var phoneSeq atomic.Int64

// fixture is one company configured to send: an account, a template, a
// campaign, an automation and a webhook endpoint, in a fresh database.
type fixture struct {
	t       testing.TB
	ctx     context.Context
	dbURL   string
	pool    *pgxpool.Pool
	cat     *catalog.Store
	clock   *testClock
	company catalog.Company
	acct    catalog.MessagingAccount
	tpl     catalog.Template
	camp    catalog.Campaign
	auto    catalog.Automation
}

const testToken = "test-token-0123456789"

func newFixture(t testing.TB) *fixture {
	t.Helper()
	ctx := context.Background()
	url, pool := storetest.NewDatabase(t)
	box, err := secretbox.New(secretbox.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, ctx: ctx, dbURL: url, pool: pool, cat: catalog.NewStore(pool, box),
		clock: newTestClock(time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC))}
	f.company = f.newCompany("acme")
	// A webhook endpoint, so that its changes write their events.
	storetest.Subscribe(t, pool, f.company.ID)
	f.acct = f.newAccount(f.company.ID, nil, "UTC", 2000)
	f.tpl = f.newTemplate(f.company.ID, whatsapp.Template{
		Name: "order_update", Language: "en_US",
		BodyParameters: []whatsapp.Binding{{Source: "first_name", Default: "there"}, {Source: "variable", Name: "order", Default: "-"}},
	})
	f.camp, err = f.cat.CreateCampaign(ctx, f.company.ID, "Summer", f.tpl.ID, f.acct.ID)
	if err != nil {
		t.Fatal(err)
	}
	f.auto, err = f.cat.CreateAutomation(ctx, catalog.NewAutomation{CompanyID: f.company.ID, Name: "Shipped", Active: true,
		TemplateID: &f.tpl.ID, MessagingAccountID: &f.acct.ID, TriggerVariables: []string{"order"}})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

var slugSeq atomic.Int64

func (f *fixture) newCompany(slug string) catalog.Company {
	f.t.Helper()
	c, err := f.cat.CreateCompany(f.ctx, catalog.NewCompany{Slug: fmt.Sprintf("%s-%d", slug, slugSeq.Add(1)), Name: slug,
		SubscriptionActive: true, Provisioned: true})
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

var pnidSeq atomic.Int64

// pnidBase keeps the phone number ids of concurrent test processes apart
// on a shared simulator.
var pnidBase = 1 + time.Now().UnixNano()%1_000_000

func (f *fixture) newAccount(companyID int64, w *catalog.DeliveryWindow, tz string, perSecond int) catalog.MessagingAccount {
	f.t.Helper()
	a, err := f.cat.CreateMessagingAccount(f.ctx, catalog.NewMessagingAccount{
		CompanyID: companyID, Name: "main", PhoneNumberID: fmt.Sprintf("%d%06d", pnidBase, pnidSeq.Add(1)),
		AccessToken: testToken, Connected: true, Timezone: tz, Window: w, ThroughputPerSecond: perSecond,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return a
}

func (f *fixture) newTemplate(companyID int64, tpl whatsapp.Template) catalog.Template {
	f.t.Helper()
	t, err := f.cat.CreateTemplate(f.ctx, catalog.NewTemplate{CompanyID: companyID, Template: tpl})
	if err != nil {
		f.t.Fatal(err)
	}
	return t
}

// phones returns n distinct numbers no other test uses.
func phones(n int) []string {
	base := 14150000000 + phoneSeq.Add(int64(n)) - int64(n)
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("+%d", base+int64(i))
	}
	return out
}

func newBatchID(t testing.TB) string {
	t.Helper()
	id, err := uuid.NewV7()
	if err != nil {
		t.Fatal(err)
	}
	return id.String()
}

func (f *fixture) campaignBatch(ph []string, forced bool, scheduledAt *time.Time) *sendsv1.CampaignBatch {
	b := &sendsv1.CampaignBatch{BatchId: newBatchID(f.t), CompanyId: f.company.ID, CampaignId: f.camp.ID,
		Phones: ph, IsForced: forced, AcceptedAt: timestamppb.New(f.clock.Now()), Source: "api:campaigns/send"}
	if scheduledAt != nil {
		b.ScheduledAt = timestamppb.New(*scheduledAt)
	}
	return b
}

// messageRow is what tests read back of a message.
type messageRow struct {
	ID        int64
	Seq       int
	Phone     string
	State     record.State
	ContactID *int64
	Attempts  int
	NotBefore time.Time
	Code      *int
	Title     *string
	WAMID     *string
	Bypass    bool
	Overrides []byte
}

func (f *fixture) messages(batchID string) []messageRow {
	f.t.Helper()
	rows, err := f.pool.Query(f.ctx, `
		SELECT id, seq, phone, state::text, contact_id, attempts, not_before, error_code, error_title, provider_message_id,
			bypass_rules, overrides
		FROM messages WHERE batch_id = $1 ORDER BY seq`, batchID)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var out []messageRow
	for rows.Next() {
		var m messageRow
		var s string
		if err := rows.Scan(&m.ID, &m.Seq, &m.Phone, &s, &m.ContactID, &m.Attempts, &m.NotBefore, &m.Code, &m.Title,
			&m.WAMID, &m.Bypass, &m.Overrides); err != nil {
			f.t.Fatal(err)
		}
		m.State = record.State(s)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		f.t.Fatal(err)
	}
	return out
}

func (f *fixture) batch(id string) record.Batch {
	f.t.Helper()
	b, err := record.BatchStatus(f.ctx, f.pool, f.company.ID, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	if _, err := f.pool.Exec(f.ctx, sql, args...); err != nil {
		f.t.Fatal(err)
	}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
