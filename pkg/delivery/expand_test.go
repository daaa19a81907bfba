package delivery

import (
	"encoding/json"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/contacts"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/pkg/segments"
)

func ptr[T any](v T) *T { return &v }

func TestExpandCampaign(t *testing.T) {
	f := newFixture(t)
	x := NewExpander(f.pool, f.cat, f.clock.Now)
	ph := phones(4)
	cs := contacts.NewStore(f.pool, f.clock.Now)
	known, err := cs.Upsert(f.ctx, f.company.ID, []contacts.Upsert{{Phone: ph[1], FirstName: ptr("Bo")}})
	if err != nil {
		t.Fatal(err)
	}
	// The gateway removed duplicates; one written without '+' still is one.
	b := f.campaignBatch([]string{ph[0], ph[1][1:], ph[2], ph[3], ph[2]}, false, nil)
	exp, err := x.Campaign(f.ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if exp.Result != ResultExpanded || exp.Messages != 4 || !exp.Due || exp.AccountID != f.acct.ID {
		t.Fatalf("expansion = %+v", exp)
	}
	msgs := f.messages(b.BatchId)
	if len(msgs) != 4 {
		t.Fatalf("messages = %d, want 4", len(msgs))
	}
	for i, m := range msgs {
		if m.Seq != i || m.Phone != ph[i] || m.State != record.StateQueued || m.Bypass || !m.NotBefore.Equal(f.clock.Now()) {
			t.Fatalf("message %d = %+v", i, m)
		}
	}
	if msgs[1].ContactID == nil || *msgs[1].ContactID != known[ph[1]].ID || msgs[0].ContactID != nil {
		t.Fatalf("contact ids: %v %v (campaigns never create contacts)", msgs[0].ContactID, msgs[1].ContactID)
	}
	if _, err := cs.ByPhone(f.ctx, f.company.ID, ph[0]); !errors.Is(err, contacts.ErrNotFound) {
		t.Fatalf("campaign created a contact: %v", err)
	}
	got := f.batch(b.BatchId)
	// The fixture writes the legacy "api:campaigns/send": recorded canonical.
	if got.Status != record.BatchProcessing || got.ContactCount != 4 || got.Counts[record.StateQueued] != 4 || got.Kind != bus.BatchCampaign ||
		got.Source != bus.SourceCampaignsSend {
		t.Fatalf("batch = %+v", got)
	}

	// Redelivery of the same batch creates nothing.
	again, err := x.Campaign(f.ctx, b)
	if err != nil || again.Result != ResultRedelivered || again.Due {
		t.Fatalf("redelivery = %+v, %v", again, err)
	}
	if n := len(f.messages(b.BatchId)); n != 4 {
		t.Fatalf("after redelivery: %d messages", n)
	}
}

func TestExpandCampaignScheduledAndForced(t *testing.T) {
	f := newFixture(t)
	x := NewExpander(f.pool, f.cat, f.clock.Now)
	at := f.clock.Now().Add(2 * time.Hour)
	b := f.campaignBatch(phones(3), true, &at)
	exp, err := x.Campaign(f.ctx, b)
	if err != nil || exp.Due || exp.Messages != 3 {
		t.Fatalf("expansion = %+v, %v", exp, err)
	}
	for _, m := range f.messages(b.BatchId) {
		if m.State != record.StateScheduled || !m.NotBefore.Equal(at) || !m.Bypass {
			t.Fatalf("message = %+v", m)
		}
	}
	if got := f.batch(b.BatchId); got.Status != record.BatchScheduled || !got.IsForced || got.ScheduledAt == nil || !got.ScheduledAt.Equal(at) {
		t.Fatalf("batch = %+v", got)
	}

	// A scheduled_at already past sends now.
	past := f.clock.Now().Add(-time.Minute)
	b2 := f.campaignBatch(phones(1), false, &past)
	if exp, err := x.Campaign(f.ctx, b2); err != nil || !exp.Due {
		t.Fatalf("past schedule = %+v, %v", exp, err)
	}
	if got := f.batch(b2.BatchId); got.Status != record.BatchProcessing {
		t.Fatalf("batch = %+v", got)
	}
}

func TestExpandFailsWhatCannotBeSent(t *testing.T) {
	f := newFixture(t)
	x := NewExpander(f.pool, f.cat, f.clock.Now)

	gone := f.campaignBatch(phones(2), false, nil)
	gone.CampaignId = f.camp.ID + 1000
	exp, err := x.Campaign(f.ctx, gone)
	if err != nil || exp.Result != ResultFailed || exp.Due {
		t.Fatalf("missing campaign = %+v, %v", exp, err)
	}
	got := f.batch(gone.BatchId)
	if got.Status != record.BatchFailed || got.Error == "" || got.Counts[record.StateFailed] != 2 || got.CompletedAt == nil {
		t.Fatalf("batch = %+v", got)
	}
	for _, m := range f.messages(gone.BatchId) {
		if m.State != record.StateFailed || m.Title == nil || *m.Title != got.Error {
			t.Fatalf("message = %+v", m)
		}
	}

	if _, err := f.cat.UpdateMessagingAccount(f.ctx, f.acct.ID, catalog.AccountUpdate{Connected: ptr(false)}); err != nil {
		t.Fatal(err)
	}
	disc := f.campaignBatch(phones(1), false, nil)
	if exp, err := x.Campaign(f.ctx, disc); err != nil || exp.Result != ResultFailed {
		t.Fatalf("disconnected account = %+v, %v", exp, err)
	}
	auto := &sendsv1.AutomationBatch{BatchId: newBatchID(t), CompanyId: f.company.ID, AutomationId: f.auto.ID,
		Contacts: []*sendsv1.AutomationContact{{Phone: phones(1)[0]}}}
	if exp, err := x.Automation(f.ctx, auto); err != nil || exp.Result != ResultFailed {
		t.Fatalf("automation on a disconnected account = %+v, %v", exp, err)
	}
	if got := f.batch(auto.BatchId); got.Status != record.BatchFailed || got.Counts[record.StateFailed] != 1 {
		t.Fatalf("batch = %+v", got)
	}

	bad := f.campaignBatch([]string{"not-a-phone"}, false, nil)
	var rej *RejectError
	if _, err := x.Campaign(f.ctx, bad); !errors.As(err, &rej) {
		t.Fatalf("bad phone: %v", err)
	}
	noID := f.campaignBatch(phones(1), false, nil)
	noID.BatchId = "nope"
	if _, err := x.Campaign(f.ctx, noID); !errors.As(err, &rej) {
		t.Fatalf("bad batch id: %v", err)
	}
	// A batch id recorded for another company is not expanded for this one.
	other := f.newCompany("other")
	stolen := f.campaignBatch(phones(1), false, nil)
	stolen.BatchId = gone.BatchId
	stolen.CompanyId = other.ID
	if _, err := x.Campaign(f.ctx, stolen); !errors.As(err, &rej) {
		t.Fatalf("batch of another company: %v", err)
	}
}

func TestExpandSegmentCampaign(t *testing.T) {
	f := newFixture(t)
	x := NewExpander(f.pool, f.cat, f.clock.Now)
	ph := phones(300)
	var segment int64
	if err := f.pool.QueryRow(f.ctx, `INSERT INTO segments (company_id, name) VALUES ($1, 'vip') RETURNING id`, f.company.ID).Scan(&segment); err != nil {
		t.Fatal(err)
	}
	f.exec(`INSERT INTO contacts (company_id, phone) SELECT $1, unnest($2::text[])`, f.company.ID, ph)
	f.exec(`INSERT INTO segment_members (segment_id, contact_id) SELECT $1, id FROM contacts WHERE company_id = $2`, segment, f.company.ID)
	b := f.campaignBatch(nil, false, nil)
	b.SegmentId = segment
	exp, err := x.Campaign(f.ctx, b)
	if err != nil || exp.Messages != 300 || !exp.Due {
		t.Fatalf("expansion = %+v, %v", exp, err)
	}
	msgs := f.messages(b.BatchId)
	if len(msgs) != 300 || msgs[299].Seq != 299 || msgs[0].ContactID == nil {
		t.Fatalf("messages = %d", len(msgs))
	}
	if got := f.batch(b.BatchId); got.ContactCount != 300 {
		t.Fatalf("batch = %+v", got)
	}
	missing := f.campaignBatch(nil, false, nil)
	missing.SegmentId = segment + 99
	if exp, err := x.Campaign(f.ctx, missing); err != nil || exp.Result != ResultFailed {
		t.Fatalf("missing segment = %+v, %v", exp, err)
	}
}

// TestExpandDeletedSegmentFails: a campaign batch accepted before its
// segment was deleted (it waited in the stream, unrecorded, so the delete
// was not refused) fails at expansion, naming the segment, and keeps its
// campaign and segment.
func TestExpandDeletedSegmentFails(t *testing.T) {
	f := newFixture(t)
	x := NewExpander(f.pool, f.cat, f.clock.Now)
	store := segments.NewStore(f.pool, f.clock.Now)
	seg, err := store.Create(f.ctx, f.company.ID, "VIP", []contacts.Upsert{{Phone: "+393330000001"}, {Phone: "+393330000002"}})
	if err != nil {
		t.Fatal(err)
	}
	b := f.campaignBatch(nil, false, nil)
	b.SegmentId, b.SegmentSize = seg.ID, 2
	if err := store.Delete(f.ctx, f.company.ID, seg.ID); err != nil {
		t.Fatal(err)
	}
	exp, err := x.Campaign(f.ctx, b)
	if err != nil || exp.Result != ResultFailed || exp.Messages != 0 {
		t.Fatalf("expansion = %+v, %v", exp, err)
	}
	got := f.batch(b.BatchId)
	if got.Status != record.BatchFailed || got.Error != `segment "VIP" was deleted` ||
		got.SegmentID == nil || *got.SegmentID != seg.ID || got.SegmentName != "VIP" || got.CampaignID == nil {
		t.Fatalf("batch = %+v", got)
	}
	if n := len(f.messages(b.BatchId)); n != 0 {
		t.Fatalf("%d messages for a deleted segment", n)
	}
}

func TestExpandAutomationUpsertsContacts(t *testing.T) {
	f := newFixture(t)
	x := NewExpander(f.pool, f.cat, f.clock.Now)
	ph := phones(3)
	cs := contacts.NewStore(f.pool, f.clock.Now)
	if _, err := cs.Upsert(f.ctx, f.company.ID, []contacts.Upsert{{Phone: ph[0], FirstName: ptr("Old"), LastName: ptr("Name"),
		Variables: map[string]string{"order": "1", "tier": "gold"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.SetOptedOut(f.ctx, f.company.ID, ph[2], true); err != nil {
		t.Fatal(err)
	}
	b := &sendsv1.AutomationBatch{
		BatchId: newBatchID(t), CompanyId: f.company.ID, AutomationId: f.auto.ID,
		ImageUrl: "https://cdn.example/req.png", Url: "https://shop.example/o/42",
		Contacts: []*sendsv1.AutomationContact{
			{Phone: ph[0][1:], FirstName: ptr("New"), Variables: map[string]string{"order": "2", "coupon": "X"}},
			{Phone: ph[1], LastName: ptr("Solo"), ImageUrl: "https://cdn.example/own.png", Variables: map[string]string{"order": "3"}},
			{Phone: ph[2], Variables: map[string]string{"order": "4"}},
			// A number again (the gateway removes these): its first entry wins whole.
			{Phone: ph[1][1:], FirstName: ptr("Later"), LastName: ptr("Later"), Variables: map[string]string{"order": "9", "extra": "y"}},
		},
	}
	exp, err := x.Automation(f.ctx, b)
	if err != nil || exp.Result != ResultExpanded || exp.Messages != 3 || !exp.Due {
		t.Fatalf("expansion = %+v, %v", exp, err)
	}
	c0, err := cs.ByPhone(f.ctx, f.company.ID, ph[0])
	if err != nil {
		t.Fatal(err)
	}
	if c0.FirstName != "New" || c0.LastName != "Name" || !maps.Equal(c0.Variables, map[string]string{"order": "2", "tier": "gold", "coupon": "X"}) {
		t.Fatalf("existing contact merged = %+v", c0)
	}
	c1, err := cs.ByPhone(f.ctx, f.company.ID, ph[1])
	if err != nil || c1.FirstName != "" || c1.LastName != "Solo" || !maps.Equal(c1.Variables, map[string]string{"order": "3"}) {
		t.Fatalf("new contact = %+v, %v", c1, err)
	}
	msgs := f.messages(b.BatchId)
	if len(msgs) != 3 {
		t.Fatalf("messages = %d", len(msgs))
	}
	for _, m := range msgs {
		if m.State != record.StateQueued || !m.Bypass || m.ContactID == nil {
			t.Fatalf("message = %+v", m)
		}
	}
	var ov0, ov1 record.Overrides
	if err := json.Unmarshal(msgs[0].Overrides, &ov0); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(msgs[1].Overrides, &ov1); err != nil {
		t.Fatal(err)
	}
	if ov0.ImageURL != "https://cdn.example/req.png" || ov0.URL != "https://shop.example/o/42" || ov0.FirstName != "New" || ov0.Variables["order"] != "2" {
		t.Fatalf("overrides 0 = %+v", ov0)
	}
	if ov1.ImageURL != "https://cdn.example/own.png" || ov1.LastName != "Solo" || ov1.FirstName != "" || len(ov1.Variables) != 1 {
		t.Fatalf("overrides 1 = %+v (the contact's image wins)", ov1)
	}
	got := f.batch(b.BatchId)
	if got.Kind != "automation" || got.Status != record.BatchProcessing || !got.IsForced || got.ContactCount != 3 {
		t.Fatalf("batch = %+v", got)
	}
	if again, err := x.Automation(f.ctx, b); err != nil || again.Result != ResultRedelivered {
		t.Fatalf("redelivery = %+v, %v", again, err)
	}
	if n := len(f.messages(b.BatchId)); n != 3 {
		t.Fatalf("after redelivery: %d messages", n)
	}
}

func TestBatchStatusIsScopedByCompany(t *testing.T) {
	f := newFixture(t)
	x := NewExpander(f.pool, f.cat, f.clock.Now)
	b := f.campaignBatch(phones(2), false, nil)
	if _, err := x.Campaign(f.ctx, b); err != nil {
		t.Fatal(err)
	}
	other := f.newCompany("other")
	for _, tc := range []struct {
		company int64
		id      string
	}{{other.ID, b.BatchId}, {f.company.ID, newBatchID(t)}, {f.company.ID, "not-a-uuid"}} {
		if _, err := record.BatchStatus(f.ctx, f.pool, tc.company, tc.id); !errors.Is(err, record.ErrNotFound) {
			t.Fatalf("BatchStatus(%d, %s) = %v, want record.ErrNotFound", tc.company, tc.id, err)
		}
	}
	got := f.batch(b.BatchId)
	if len(got.Counts) != len(record.States) || got.Counts[record.StateQueued] != 2 {
		t.Fatalf("counts = %v", got.Counts)
	}
}
