package record_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/events"
	"github.com/parleyhq/parley/pkg/record"
)

// countersMatchRecord fails the test unless the company's counters (folded
// and not) are exactly what parley_report_counts computes from the
// messages; it returns how many counter rows it compared.
func (f *fixture) countersMatchRecord() int {
	f.t.Helper()
	rows, err := f.pool.Query(f.ctx, `
		WITH live AS (
			SELECT subject_kind, subject_id, hour, metric, code, label, sum(n)::bigint AS n FROM (
				SELECT subject_kind, subject_id, hour, metric, code, label, n FROM report_hours WHERE company_id = $1
				UNION ALL
				SELECT subject_kind, subject_id, hour, metric, code, label, n FROM report_deltas WHERE company_id = $1) x
			GROUP BY 1, 2, 3, 4, 5, 6 HAVING sum(n) <> 0
		), truth AS (SELECT * FROM parley_report_counts($1))
		SELECT COALESCE(l.subject_kind, t.subject_kind), COALESCE(l.subject_id, t.subject_id), COALESCE(l.hour, t.hour),
			COALESCE(l.metric, t.metric), COALESCE(l.code, t.code), COALESCE(l.label, t.label),
			COALESCE(l.n, 0), COALESCE(t.n, 0)
		FROM live l FULL JOIN truth t USING (subject_kind, subject_id, hour, metric, code, label)`, f.comp.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var kind, metric, label string
		var subject, live, truth int64
		var code int
		var hour time.Time
		if err := rows.Scan(&kind, &subject, &hour, &metric, &code, &label, &live, &truth); err != nil {
			f.t.Fatal(err)
		}
		n++
		if live != truth {
			f.t.Errorf("%s %d %s %s %d %q: counted %d, the messages say %d", kind, subject, hour.Format(time.RFC3339),
				metric, code, label, live, truth)
		}
	}
	if err := rows.Err(); err != nil {
		f.t.Fatal(err)
	}
	return n
}

func (f *fixture) fold() record.FoldResult {
	f.t.Helper()
	res, err := record.FoldReports(f.ctx, f.pool, 1000)
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

func (f *fixture) report(kind string, id int64, from, to time.Time, interval string) record.Report {
	f.t.Helper()
	rep, err := record.ReadReport(f.ctx, f.pool, record.ReportQuery{CompanyID: f.comp.ID, SubjectKind: kind, SubjectID: id,
		From: from, To: to, Interval: interval})
	if err != nil {
		f.t.Fatal(err)
	}
	return rep
}

// TestCountersFollowEveryWriter sends a campaign through every writer of
// the record (expansion, opt-out skips, claims, outcomes of each kind,
// callbacks in every order with pricing, a reply, the lease, cancel, an
// erasure) and holds the counters to the messages after each step, then
// reads the report.
func TestCountersFollowEveryWriter(t *testing.T) {
	f := newFixture(t)
	lane, acct := record.LaneCampaign, f.camp.MessagingAccountID
	later := f.now.Add(time.Hour)
	f.expand(f.campaignBatch(2, &later)) // scheduled: accepted, waiting
	b := f.campaignBatch(8, nil)
	f.expand(b)
	if n := f.countersMatchRecord(); n == 0 {
		t.Fatal("no counters after two expansions")
	}

	claimed, err := record.Claim(f.ctx, f.pool, lane, acct, 7, f.now, false)
	if err != nil || len(claimed) != 7 {
		t.Fatalf("claim: %d, %v", len(claimed), err)
	}
	wamid := func(i int) string { return fmt.Sprintf("wamid.report.%d", claimed[i].ID) }
	outcome := func(i int, kind record.OutcomeKind, code int) record.Outcome {
		c := claimed[i]
		o := record.Outcome{Kind: kind, ID: c.ID, BatchID: c.BatchID, ClaimedAt: c.ClaimedAt, Code: code,
			NotBefore: f.now, At: f.now.Add(time.Second), Title: "Rate limit hit"}
		if kind == record.OutcomeSent {
			o.Wamid = wamid(i)
		}
		return o
	}
	outs := []record.Outcome{outcome(0, record.OutcomeSent, 0), outcome(1, record.OutcomeSent, 0),
		outcome(2, record.OutcomeSent, 0), outcome(3, record.OutcomeSent, 0),
		outcome(4, record.OutcomeFailed, 131026), outcome(5, record.OutcomeRetry, 130429)}
	outs[4].Title = "Message undeliverable"
	if _, err := record.RecordOutcomes(f.ctx, f.pool, outs, f.now); err != nil {
		t.Fatal(err)
	}
	f.countersMatchRecord()

	// Callbacks: 0 read, then its delivered (priced) comes late; 1 failed,
	// then delivered (it leaves failed); 2 delivered and read in one webhook
	// without pricing, then its sent (priced) comes late; 3 failed for
	// good; claimed[6], still sending, delivered before its outcome is
	// recorded; the late one failed, then delivered. All billed.
	at := f.now.Add(2 * time.Minute)
	priced := func(u whatsapp.StatusUpdate) whatsapp.StatusUpdate {
		u.Pricing = &whatsapp.Pricing{Billable: true, Category: "marketing", Model: "PMP"}
		return u
	}
	st := func(id string, s whatsapp.Status) whatsapp.StatusUpdate {
		u := whatsapp.StatusUpdate{MessageID: id, Status: s, Timestamp: at}
		if s == whatsapp.StatusFailed {
			u.Errors = []whatsapp.StatusError{{Code: 131047, Title: "Re-engagement message"}}
		}
		return u
	}
	if _, err := f.pool.Exec(f.ctx, `UPDATE messages SET provider_message_id = $2 WHERE id = $1`, claimed[6].ID, "wamid.early"); err != nil {
		t.Fatal(err)
	}
	// claimed[5], queued for a retry, as if its second attempt were under
	// way and had reached the provider: failed by a callback, then
	// delivered, its send never recorded.
	if _, err := f.pool.Exec(f.ctx, `UPDATE messages SET state = 'sending', claimed_at = $2, provider_message_id = 'wamid.late'
		WHERE id = $1`, claimed[5].ID, f.now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	for _, batch := range [][]whatsapp.StatusUpdate{
		{st(wamid(0), whatsapp.StatusSent)}, {st(wamid(0), whatsapp.StatusRead)}, {priced(st(wamid(0), whatsapp.StatusDelivered))},
		{st(wamid(1), whatsapp.StatusFailed)}, {priced(st(wamid(1), whatsapp.StatusDelivered))},
		{st(wamid(2), whatsapp.StatusDelivered), st(wamid(2), whatsapp.StatusRead)}, {priced(st(wamid(2), whatsapp.StatusSent))},
		{st(wamid(3), whatsapp.StatusFailed)},
		{priced(st("wamid.early", whatsapp.StatusDelivered))},
		{st("wamid.late", whatsapp.StatusFailed)}, {priced(st("wamid.late", whatsapp.StatusDelivered))},
	} {
		if _, err := record.ApplyStatuses(f.ctx, f.pool, batch, at); err != nil {
			t.Fatal(err)
		}
	}
	f.countersMatchRecord()
	var billable bool
	var category, model string
	if err := f.pool.QueryRow(f.ctx, `SELECT billable, pricing_category, pricing_model FROM messages WHERE id = $1`,
		claimed[0].ID).Scan(&billable, &category, &model); err != nil || !billable || category != "marketing" || model != "PMP" {
		t.Fatalf("pricing of a read message: %v %q %q, %v", billable, category, model, err)
	}

	// The delivered events carry the pricing of their callbacks.
	pricedEvents := 0
	for _, raw := range f.outbox(events.MessageDelivered) {
		var ev struct {
			Pricing *events.Pricing `json:"pricing"`
		}
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Pricing != nil && *ev.Pricing == (events.Pricing{Billable: true, Category: "marketing", Model: "PMP"}) {
			pricedEvents++
		}
	}
	if pricedEvents != 3 {
		t.Errorf("%d message.delivered events with their pricing, want 3 (1, the early and the late one; 0 and 2 went to read at once, "+
			"their delivered events with the read's callback, which had no pricing)", pricedEvents)
	}

	// Contacts answer: 2 quotes its message; 0 just writes (its message is
	// the last sent to it from this number); 0 again (counted once).
	in0 := f.inbound("wamid.in.0", claimed[0].Phone, "Is my order shipped?", at.Add(time.Minute))
	in2 := f.inbound("wamid.in.2", claimed[2].Phone, "Thanks", at.Add(time.Minute))
	in2.ContextID = wamid(2)
	again := f.inbound("wamid.in.0b", claimed[0].Phone, "Hello?", at.Add(2*time.Minute))
	if _, err := record.Receive(f.ctx, f.pool, []whatsapp.InboundMessage{in0, in2, again}, at.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	f.countersMatchRecord()

	// The rest: the retried and the unclaimed message are cancelled with
	// their batch, and a contact is erased (its counts stay; its scheduled
	// message is cancelled).
	if _, err := record.ReturnStale(f.ctx, f.pool, lane, f.now.Add(3*time.Minute), f.now.Add(3*time.Minute), 8); err != nil {
		t.Fatal(err)
	}
	if _, err := record.CancelAt(f.ctx, f.pool, f.comp.ID, b.BatchId, f.now.Add(4*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := record.EraseContact(f.ctx, f.pool, f.comp.ID, claimed[2].Phone, f.now.Add(5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	f.countersMatchRecord()
	if res := f.fold(); res.Folded == 0 || res.Busy {
		t.Fatalf("fold: %+v", res)
	}
	var left int
	if err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM report_deltas`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d deltas left after a fold (%v)", left, err)
	}
	f.countersMatchRecord()

	rep := f.report(record.SubjectCampaign, f.camp.ID, f.now.Add(-time.Hour), f.now.Add(time.Hour), record.IntervalHour)
	want := record.Counts{Accepted: 10, Sent: 6, Delivered: 5, Read: 2, Replied: 2, Failed: 2, Cancelled: 2, Billable: 5}
	if rep.Counts != want {
		t.Errorf("report counts %+v, want %+v", rep.Counts, want)
	}
	if rep.Waiting != 1 {
		t.Errorf("waiting %d, want the scheduled message whose contact was not erased", rep.Waiting)
	}
	if len(rep.Series) != 2 || rep.Series[1].Counts != want || rep.Series[0].Counts != (record.Counts{}) {
		t.Errorf("series %+v: want the hour before empty and the hour of the sends with everything", rep.Series)
	}
	if len(rep.Failures) != 2 || rep.Failures[0].Code != 131026 || rep.Failures[1].Code != 131047 ||
		!strings.HasPrefix(rep.Failures[1].Title, "Re-engagement") {
		t.Errorf("failures %+v", rep.Failures)
	}
	if len(rep.Billing) != 1 || rep.Billing[0] != (record.CategoryCount{Category: "marketing", Count: 5}) {
		t.Errorf("billing %+v", rep.Billing)
	}
	if rep.Rates.Delivered == nil || *rep.Rates.Delivered != 0.8333 || *rep.Rates.Read != 0.4 || *rep.Rates.Replied != 0.4 {
		t.Errorf("rates %+v", rep.Rates)
	}

	// A rebuild from the messages gives the same report.
	if _, err := record.RebuildReports(f.ctx, f.pool, f.comp.ID); err != nil {
		t.Fatal(err)
	}
	if again := f.report(record.SubjectCampaign, f.camp.ID, f.now.Add(-time.Hour), f.now.Add(time.Hour), record.IntervalHour); again.Counts != want {
		t.Errorf("rebuilt report %+v, want %+v", again.Counts, want)
	}
	// Another company's report of the same campaign id is empty.
	other, err := record.ReadReport(f.ctx, f.pool, record.ReportQuery{CompanyID: f.other.ID, SubjectKind: record.SubjectCampaign,
		SubjectID: f.camp.ID, From: f.now.Add(-time.Hour), To: f.now.Add(time.Hour), Interval: record.IntervalDay})
	if err != nil || other.Accepted != 0 || other.Waiting != 0 {
		t.Errorf("another company's report: %+v, %v", other.Counts, err)
	}
}

func TestReportBuckets(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip("no tzdata:", err)
	}
	from := time.Date(2026, 3, 7, 15, 30, 0, 0, time.UTC)
	for _, c := range []struct {
		name     string
		to       time.Time
		interval string
		loc      *time.Location
		n        int
		first    time.Time
		err      bool
	}{
		{"hours, rounded out", from.Add(2 * time.Hour), record.IntervalHour, nil, 3, time.Date(2026, 3, 7, 15, 0, 0, 0, time.UTC), false},
		{"days across a DST change", from.AddDate(0, 0, 3), record.IntervalDay, ny, 4, time.Date(2026, 3, 7, 0, 0, 0, 0, ny), false},
		{"empty", from, record.IntervalHour, nil, 0, time.Time{}, true},
		{"backwards", from.Add(-time.Hour), record.IntervalDay, nil, 0, time.Time{}, true},
		{"too many hours", from.AddDate(0, 0, 32), record.IntervalHour, nil, 0, time.Time{}, true},
		{"a year of days", from.AddDate(1, 0, 0), record.IntervalDay, nil, 366, time.Date(2026, 3, 7, 0, 0, 0, 0, time.UTC), false},
		{"no such interval", from.Add(time.Hour), "week", nil, 0, time.Time{}, true},
	} {
		got, err := record.ReportBuckets(from, c.to, c.interval, c.loc)
		if c.err {
			if err == nil {
				t.Errorf("%s: %d buckets, want an error", c.name, len(got))
			}
			continue
		}
		if err != nil || len(got) != c.n || !got[0].Equal(c.first) {
			t.Errorf("%s: %d buckets from %v (%v), want %d from %v", c.name, len(got), got, err, c.n, c.first)
			continue
		}
		if c.interval == record.IntervalDay && c.loc == ny && got[2].Sub(got[1]) != 23*time.Hour {
			t.Errorf("%s: the day DST begins lasts %v", c.name, got[2].Sub(got[1]))
		}
	}
}
