package record_test

import (
	"encoding/base64"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/record"
)

// listIDs lists every batch the filter selects, page after page of size,
// and fails on a batch listed twice.
func (f *fixture) listIDs(filter record.BatchFilter, size int) []string {
	f.t.Helper()
	filter.Limit = size
	var ids []string
	for pages := 0; ; pages++ {
		p, err := record.ListBatches(f.ctx, f.pool, f.comp.ID, filter)
		if err != nil {
			f.t.Fatal(err)
		}
		if len(p.Batches) > size || pages > 50 {
			f.t.Fatalf("page of %d for a limit of %d (page %d)", len(p.Batches), size, pages)
		}
		for _, b := range p.Batches {
			if slices.Contains(ids, b.ID) {
				f.t.Fatalf("batch %s listed twice", b.ID)
			}
			ids = append(ids, b.ID)
		}
		if p.NextCursor == nil {
			return ids
		}
		filter.Cursor = *p.NextCursor
	}
}

func TestListBatchesNewestFirstWithNamesPagesAndFilters(t *testing.T) {
	f := newFixture(t)
	start := f.now
	// Five campaign batches a minute apart, the third scheduled; then an
	// automation trigger; then a batch of another company.
	var camp []string
	for i := range 5 {
		f.now = start.Add(time.Duration(i) * time.Minute)
		var at *time.Time
		if i == 2 {
			later := f.now.Add(24 * time.Hour)
			at = &later
		}
		b := f.campaignBatch(2, at)
		if i == 4 {
			b.Source = "api:campaigns/send" // recorded with the legacy spelling
		}
		f.expand(b)
		camp = append(camp, b.BatchId)
	}
	f.now = start.Add(10 * time.Minute)
	autoID, _ := uuid.NewV7()
	auto := &sendsv1.AutomationBatch{BatchId: autoID.String(), CompanyId: f.comp.ID, AutomationId: f.auto.ID,
		Contacts: []*sendsv1.AutomationContact{{Phone: "+14155550001"}}, AcceptedAt: timestamppb.New(f.now)}
	if _, err := f.exp.Automation(f.ctx, auto); err != nil {
		t.Fatal(err)
	}
	otherID, _ := uuid.NewV7()
	if _, err := f.exp.Campaign(f.ctx, &sendsv1.CampaignBatch{BatchId: otherID.String(), CompanyId: f.other.ID,
		CampaignId: f.camp.ID, Phones: phones(1), AcceptedAt: timestamppb.New(f.now)}); err != nil {
		t.Fatal(err)
	}

	newestFirst := []string{auto.BatchId, camp[4], camp[3], camp[2], camp[1], camp[0]}
	for _, size := range []int{1, 2, 4, 100} {
		if got := f.listIDs(record.BatchFilter{}, size); !slices.Equal(got, newestFirst) {
			t.Fatalf("pages of %d: %v, want %v (newest first, not another company's)", size, got, newestFirst)
		}
	}
	p, err := record.ListBatches(f.ctx, f.pool, f.comp.ID, record.BatchFilter{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	a, c := p.Batches[0], p.Batches[1]
	if a.Kind != bus.BatchAutomation || a.AutomationID == nil || *a.AutomationID != f.auto.ID || a.AutomationName != "Shipped" ||
		a.CampaignID != nil || a.Counts != nil {
		t.Fatalf("automation batch listed as %+v", a)
	}
	if c.CampaignName != "Summer" || c.CampaignID == nil || *c.CampaignID != f.camp.ID || c.Source != bus.SourceCampaignsSend ||
		c.ContactCount != 2 || !c.AcceptedAt.Equal(start.Add(4*time.Minute)) {
		t.Fatalf("campaign batch listed as %+v", c)
	}

	since, until := start.Add(time.Minute), start.Add(3*time.Minute)
	for name, c := range map[string]struct {
		filter record.BatchFilter
		want   []string
	}{
		"kind":       {record.BatchFilter{Kind: bus.BatchCampaign}, newestFirst[1:]},
		"automation": {record.BatchFilter{AutomationID: f.auto.ID}, newestFirst[:1]},
		"campaign":   {record.BatchFilter{CampaignID: f.camp.ID}, newestFirst[1:]},
		"status":     {record.BatchFilter{Status: record.BatchScheduled}, []string{camp[2]}},
		"source":     {record.BatchFilter{Source: bus.SourceCampaignsSend}, newestFirst[1:]},
		"legacy":     {record.BatchFilter{Source: "api:campaigns/send"}, newestFirst[1:]},
		"connector":  {record.BatchFilter{Source: bus.ConnectorSource("shopify")}, nil},
		"time":       {record.BatchFilter{Since: &since, Until: &until}, []string{camp[2], camp[1]}},
		"combined":   {record.BatchFilter{Kind: bus.BatchCampaign, Status: record.BatchProcessing, Until: &until}, []string{camp[1], camp[0]}},
	} {
		if got := f.listIDs(c.filter, 2); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
}

func TestListBatchesRefusesBadFilters(t *testing.T) {
	f := newFixture(t)
	at := f.now
	foreign := base64.RawURLEncoding.EncodeToString([]byte("v1:" + uuid.NewString() + ":3")) // a message cursor
	for field, filter := range map[string]record.BatchFilter{
		"kind":   {Kind: "sms"},
		"status": {Status: "done"},
		"until":  {Since: &at, Until: &at},
		"limit":  {Limit: record.MaxBatchLimit + 1},
		"cursor": {Cursor: foreign},
	} {
		_, err := record.ListBatches(f.ctx, f.pool, f.comp.ID, filter)
		var inv *record.InvalidError
		if !errors.As(err, &inv) || inv.Field != field {
			t.Errorf("%s: %v, want an InvalidError on %s", field, err, field)
		}
	}
	for _, c := range []string{"%%%", base64.RawURLEncoding.EncodeToString([]byte("v1:batches:nope"))} {
		if _, err := record.ListBatches(f.ctx, f.pool, f.comp.ID, record.BatchFilter{Cursor: c}); err == nil {
			t.Errorf("cursor %q accepted", c)
		}
	}
}

func TestFindMessageByIDAndWamid(t *testing.T) {
	f := newFixture(t)
	b := f.campaignBatch(2, nil)
	f.expand(b)
	page, err := record.Messages(f.ctx, f.pool, f.comp.ID, b.BatchId, record.Filter{})
	if err != nil || len(page.Messages) != 2 {
		t.Fatalf("%+v, %v", page, err)
	}
	m := page.Messages[1]
	// As a send would leave it: the wamid WhatsApp answered.
	if _, err := f.pool.Exec(f.ctx, `UPDATE messages SET provider_message_id = 'wamid.find-me' WHERE id = $1`, m.ID); err != nil {
		t.Fatal(err)
	}
	byID, err := record.MessageByID(f.ctx, f.pool, f.comp.ID, m.ID)
	if err != nil || byID.ID != m.ID || byID.Phone != m.Phone || byID.Seq != 1 || byID.BatchID != b.BatchId ||
		byID.Kind != bus.BatchCampaign || byID.Lane != record.LaneCampaign || byID.State != m.State {
		t.Fatalf("by id: %+v, %v", byID, err)
	}
	byWamid, err := record.MessageByWamid(f.ctx, f.pool, f.comp.ID, "wamid.find-me")
	if err != nil || byWamid.ID != m.ID || byWamid.ProviderMessageID == nil || *byWamid.ProviderMessageID != "wamid.find-me" {
		t.Fatalf("by wamid: %+v, %v", byWamid, err)
	}
	for name, find := range map[string]func() (record.Found, error){
		"another company's id":    func() (record.Found, error) { return record.MessageByID(f.ctx, f.pool, f.other.ID, m.ID) },
		"another company's wamid": func() (record.Found, error) { return record.MessageByWamid(f.ctx, f.pool, f.other.ID, "wamid.find-me") },
		"unknown id":              func() (record.Found, error) { return record.MessageByID(f.ctx, f.pool, f.comp.ID, m.ID+1000) },
		"unknown wamid":           func() (record.Found, error) { return record.MessageByWamid(f.ctx, f.pool, f.comp.ID, "wamid.none") },
	} {
		if _, err := find(); !errors.Is(err, record.ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", name, err)
		}
	}
}

func TestPhoneMessagesNewestFirstAcrossBatches(t *testing.T) {
	f := newFixture(t)
	var want []int64 // the messages to +14155550001, newest first
	for range 3 {
		b := f.campaignBatch(2, nil) // +14155550000 and +14155550001
		f.expand(b)
		page, err := record.Messages(f.ctx, f.pool, f.comp.ID, b.BatchId, record.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		want = append([]int64{page.Messages[1].ID}, want...)
	}
	for _, size := range []int{1, 2, 50} {
		var got []int64
		filter := record.PhoneFilter{Limit: size}
		for {
			p, err := record.PhoneMessages(f.ctx, f.pool, f.comp.ID, "+14155550001", filter)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range p.Messages {
				m := e.Out
				if m == nil || m.Phone != "+14155550001" || m.BatchID == "" || m.Kind != bus.BatchCampaign || m.Direction != record.DirectionOutbound {
					t.Fatalf("listed %+v", e)
				}
				got = append(got, m.ID)
			}
			if p.NextCursor == nil {
				break
			}
			filter.Cursor = *p.NextCursor
		}
		if !slices.Equal(got, want) {
			t.Fatalf("pages of %d: %v, want %v (newest first)", size, got, want)
		}
	}
	// Another company's contact, or no contact: not found.
	for _, c := range []struct {
		company int64
		phone   string
	}{{f.other.ID, "+14155550001"}, {f.comp.ID, "+14155559999"}} {
		if _, err := record.PhoneMessages(f.ctx, f.pool, c.company, c.phone, record.PhoneFilter{}); !errors.Is(err, record.ErrNotFound) {
			t.Errorf("company %d, %s: %v, want ErrNotFound", c.company, c.phone, err)
		}
	}
	// A cursor of another number, or of nothing, is refused.
	p, err := record.PhoneMessages(f.ctx, f.pool, f.comp.ID, "+14155550000", record.PhoneFilter{Limit: 1})
	if err != nil || p.NextCursor == nil {
		t.Fatalf("%+v, %v", p, err)
	}
	for _, bad := range []record.PhoneFilter{{Cursor: *p.NextCursor}, {Cursor: "x"}, {Limit: record.MaxPhoneLimit + 1}} {
		var inv *record.InvalidError
		if _, err := record.PhoneMessages(f.ctx, f.pool, f.comp.ID, "+14155550001", bad); !errors.As(err, &inv) {
			t.Errorf("%+v: %v, want an InvalidError", bad, err)
		}
	}
}
