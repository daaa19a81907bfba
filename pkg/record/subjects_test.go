package record_test

import (
	"errors"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/record"
)

// TestListSubjects lists a company's campaigns and automations with their
// all-time counts: the same as a report over every hour, folded or not;
// one without messages is listed with zeros; another company's are not.
func TestListSubjects(t *testing.T) {
	f := newFixture(t)
	quiet, err := f.cat.CreateCampaign(f.ctx, f.comp.ID, "autumn", f.camp.TemplateID, f.camp.MessagingAccountID)
	if err != nil {
		t.Fatal(err)
	}
	later := f.now.Add(time.Hour)
	f.expand(f.campaignBatch(2, &later))
	b := f.campaignBatch(5, nil)
	f.expand(b)
	claimed, err := record.Claim(f.ctx, f.pool, record.LaneCampaign, f.camp.MessagingAccountID, 3, f.now, false)
	if err != nil || len(claimed) != 3 {
		t.Fatalf("claim: %d, %v", len(claimed), err)
	}
	var outs []record.Outcome
	for i, c := range claimed {
		o := record.Outcome{Kind: record.OutcomeSent, ID: c.ID, BatchID: c.BatchID, ClaimedAt: c.ClaimedAt, At: f.now.Add(time.Second),
			Wamid: "wamid.list." + c.Phone}
		if i == 2 {
			o.Kind, o.Wamid, o.Code, o.Title = record.OutcomeFailed, "", 131026, "Message undeliverable"
		}
		outs = append(outs, o)
	}
	if _, err := record.RecordOutcomes(f.ctx, f.pool, outs, f.now); err != nil {
		t.Fatal(err)
	}

	check := func(step string) {
		t.Helper()
		got, err := record.ListSubjects(f.ctx, f.pool, f.comp.ID, record.SubjectCampaign)
		if err != nil {
			t.Fatal(err)
		}
		// By name whatever the case: "autumn" before "Summer".
		if len(got) != 2 || got[0].ID != quiet.ID || got[1].ID != f.camp.ID {
			t.Fatalf("%s: listed %+v", step, got)
		}
		if q := got[0]; q.Counts != (record.Counts{}) || q.Waiting != 0 || q.LastActivity != nil || q.Rates.Delivered != nil ||
			q.Template == nil || q.Template.Name != "hello" || q.Active != nil {
			t.Errorf("%s: the campaign without messages: %+v", step, q)
		}
		rep := f.report(record.SubjectCampaign, f.camp.ID, f.now.Add(-24*time.Hour), f.now.Add(24*time.Hour), record.IntervalDay)
		s := got[1]
		if s.Counts != rep.Counts || s.Waiting != rep.Waiting || s.Waiting != 4 || s.Sent != 2 || s.Failed != 1 {
			t.Errorf("%s: listed %+v waiting %d; the report has %+v waiting %d", step, s.Counts, s.Waiting, rep.Counts, rep.Waiting)
		}
		if s.Rates.Delivered == nil || *s.Rates.Delivered != 0 || s.Rates.Read != nil {
			t.Errorf("%s: rates %+v", step, s.Rates)
		}
		if s.LastActivity == nil || !s.LastActivity.Equal(f.now.Truncate(time.Hour)) {
			t.Errorf("%s: last activity %v, want the hour of the sends", step, s.LastActivity)
		}
		if s.MessagingAccount == nil || s.MessagingAccount.ID != f.camp.MessagingAccountID {
			t.Errorf("%s: number %+v", step, s.MessagingAccount)
		}
	}
	check("unfolded")
	f.fold()
	check("folded")

	autos, err := record.ListSubjects(f.ctx, f.pool, f.comp.ID, record.SubjectAutomation)
	if err != nil || len(autos) != 1 || autos[0].Name != "Shipped" || autos[0].Active == nil || !*autos[0].Active ||
		autos[0].Accepted != 0 {
		t.Fatalf("automations %+v, %v", autos, err)
	}
	if _, err := f.cat.CreateAutomation(f.ctx, catalog.NewAutomation{CompanyID: f.other.ID, Name: "Theirs"}); err != nil {
		t.Fatal(err)
	}
	if others, err := record.ListSubjects(f.ctx, f.pool, f.other.ID, record.SubjectCampaign); err != nil || len(others) != 0 {
		t.Errorf("another company's campaigns %+v, %v", others, err)
	}
	if others, err := record.ListSubjects(f.ctx, f.pool, f.other.ID, record.SubjectAutomation); err != nil || len(others) != 1 ||
		others[0].Template != nil || others[0].MessagingAccount != nil {
		t.Errorf("another company's automations %+v, %v", others, err)
	}
	if _, err := record.ListSubjects(f.ctx, f.pool, f.comp.ID, "segment"); !errors.Is(err, record.ErrNotFound) {
		t.Errorf("a list of segments: %v", err)
	}

	s, err := record.ReadSubject(f.ctx, f.pool, f.comp.ID, record.SubjectCampaign, f.camp.ID)
	if err != nil || s.Name != "Summer" || s.Template.Language != "en_US" {
		t.Errorf("read subject %+v, %v", s, err)
	}
	if _, err := record.ReadSubject(f.ctx, f.pool, f.other.ID, record.SubjectCampaign, f.camp.ID); !errors.Is(err, record.ErrNotFound) {
		t.Errorf("another company's campaign: %v", err)
	}
}
