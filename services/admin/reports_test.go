package main

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/pkg/secretbox"
)

// reportsFixture is acme's campaigns (one sent twice, one never), its
// automation, and globex's campaign and automation.
type reportsFixture struct {
	spring, autumn      catalog.Campaign
	automation          catalog.Automation
	foreignCampaign     catalog.Campaign
	foreignAutomation   catalog.Automation
	segment             int64
	first, second, auto string
}

// seedReports provisions the fixture's campaigns and automations, writes
// their batches as the dispatchers leave them, with pricing and a reply,
// and computes the report counters from the messages (record.RebuildReports).
func (e *env) seedReports() reportsFixture {
	e.t.Helper()
	ctx := context.Background()
	box, err := secretbox.New(secretbox.DevKey)
	if err != nil {
		e.t.Fatal(err)
	}
	cat := catalog.NewStore(e.Pool, box)
	must := func(err error) {
		e.t.Helper()
		if err != nil {
			e.t.Fatal(err)
		}
	}
	provision := func(companyID int64, number, campaign, automation string) (catalog.Campaign, catalog.Automation) {
		acct, err := cat.CreateMessagingAccount(ctx, catalog.NewMessagingAccount{CompanyID: companyID, Name: number,
			PhoneNumberID: strconv.FormatInt(2_000_000+companyID, 10), AccessToken: "test-token", Connected: true})
		must(err)
		tpl, err := cat.CreateTemplate(ctx, catalog.NewTemplate{CompanyID: companyID, Template: whatsapp.Template{Name: "spring_offer", Language: "en_US"}})
		must(err)
		c, err := cat.CreateCampaign(ctx, companyID, campaign, tpl.ID, acct.ID)
		must(err)
		a, err := cat.CreateAutomation(ctx, catalog.NewAutomation{CompanyID: companyID, Name: automation, Active: true,
			TemplateID: &tpl.ID, MessagingAccountID: &acct.ID})
		must(err)
		return c, a
	}
	var f reportsFixture
	f.spring, f.automation = provision(e.CompanyID, "Acme support", "Spring sale", "Order shipped")
	var err2 error
	f.autumn, err2 = cat.CreateCampaign(ctx, e.CompanyID, "autumn teaser", f.spring.TemplateID, f.spring.MessagingAccountID)
	must(err2)
	other, err := cat.CreateCompany(ctx, catalog.NewCompany{Slug: "globex", Name: "Globex", SubscriptionActive: true, Provisioned: true})
	must(err)
	f.foreignCampaign, f.foreignAutomation = provision(other.ID, "Globex main", "Globex deals", "Globex welcome")
	must(e.Pool.QueryRow(ctx, `INSERT INTO segments (company_id, name) VALUES ($1, 'VIP customers') RETURNING id`, e.CompanyID).Scan(&f.segment))

	attach := func(batchID, column string, id int64) {
		e.t.Helper()
		_, err := e.Pool.Exec(ctx, `UPDATE batches SET `+column+` = $2 WHERE id = $1`, batchID, id)
		must(err)
	}
	// Sunday: 9 contacts, 4 delivered (one read, one replied to), 2 failed, 1 skipped, 2 queued.
	sunday := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	f.first = e.seedBatch(e.CompanyID, "campaign", "api:campaigns_send", "processing", sunday, 0, concat(
		repeatMsg(3, fixtureMsg{State: "delivered", At: 20 * time.Second}),
		repeatMsg(1, fixtureMsg{State: "read", At: 40 * time.Minute}),
		repeatMsg(2, fixtureMsg{State: "failed", At: 10 * time.Second, Code: 131026, Title: "Message undeliverable"}),
		repeatMsg(1, fixtureMsg{State: "skipped_opt_out", At: 5 * time.Second}),
		repeatMsg(2, fixtureMsg{State: "queued", At: time.Second}),
	))
	attach(f.first, "campaign_id", f.spring.ID)
	attach(f.first, "segment_id", f.segment)
	// Monday: 2 delivered, 1 failed without a code.
	monday := time.Date(2025, 6, 2, 8, 0, 0, 0, time.UTC)
	f.second = e.seedBatch(e.CompanyID, "campaign", "api:campaigns_send", "completed", monday, 0, concat(
		repeatMsg(2, fixtureMsg{State: "delivered", At: 30 * time.Second}),
		repeatMsg(1, fixtureMsg{State: "failed", At: 10 * time.Second}),
	))
	attach(f.second, "campaign_id", f.spring.ID)
	f.auto = e.seedBatch(e.CompanyID, "automation", "api:automations_send", "completed", monday, 0,
		repeatMsg(3, fixtureMsg{State: "read", At: time.Minute}))
	attach(f.auto, "automation_id", f.automation.ID)
	foreign := e.seedBatch(other.ID, "campaign", "api:campaigns_send", "completed", sunday, 0,
		repeatMsg(5, fixtureMsg{State: "delivered", At: time.Minute}))
	attach(foreign, "campaign_id", f.foreignCampaign.ID)

	// WhatsApp billed every delivered message as marketing; one contact answered.
	_, err = e.Pool.Exec(ctx, `UPDATE messages SET billable = true, pricing_category = 'marketing', pricing_model = 'PMP'
		WHERE delivered_at IS NOT NULL`)
	must(err)
	_, err = e.Pool.Exec(ctx, `UPDATE messages SET replied_at = delivered_at + interval '5 minutes'
		WHERE batch_id = $1 AND seq = 0`, f.first)
	must(err)
	for _, id := range []int64{e.CompanyID, other.ID} {
		_, err := record.RebuildReports(ctx, e.Pool, id)
		must(err)
	}
	return f
}

var (
	figureRe = regexp.MustCompile(`<div class="figure" data-metric="([a-z_]+)" data-value="(-?\d+)"`)
	waitRe   = regexp.MustCompile(`id="waiting" data-value="(-?\d+)"`)
)

// figuresOn reads the totals a report page shows, by metric, and its
// "waiting now".
func figuresOn(body string) map[string]int64 {
	out := map[string]int64{}
	for _, m := range figureRe.FindAllStringSubmatch(body, -1) {
		out[m[1]], _ = strconv.ParseInt(m[2], 10, 64)
	}
	if m := waitRe.FindStringSubmatch(body); m != nil {
		out["waiting"], _ = strconv.ParseInt(m[1], 10, 64)
	}
	return out
}

// reportFigures are a report's totals as figuresOn reads them.
func reportFigures(r record.SubjectReport) map[string]int64 {
	return map[string]int64{"accepted": r.Accepted, "sent": r.Sent, "delivered": r.Delivered, "read": r.Read, "replied": r.Replied,
		"failed": r.Failed, "skipped_opt_out": r.SkippedOptOut, "cancelled": r.Cancelled, "billable": r.Billable, "waiting": r.Waiting}
}

func sameFigures(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestConsoleReports(t *testing.T) {
	e := newEnv(t, nil)
	f := e.seedReports()
	ctx := context.Background()
	member := e.browser()
	member.mustSignIn("max@acme.example")
	read := func(kind string, id int64, from, to time.Time, interval string) record.SubjectReport {
		t.Helper()
		r, err := record.ReadSubjectReport(ctx, e.Pool, record.ReportQuery{CompanyID: e.CompanyID, SubjectKind: kind, SubjectID: id,
			From: from, To: to, Interval: interval, Location: time.UTC})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	day := func(d int) time.Time { return time.Date(2025, 6, d, 0, 0, 0, 0, time.UTC) }

	if p := e.browser().get(fmt.Sprintf("/campaigns/%d", f.spring.ID)); p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/login" {
		t.Fatalf("signed out: %d to %q", p.Status, p.Header.Get("Location"))
	}

	t.Run("campaigns list", func(t *testing.T) {
		p := member.get("/campaigns")
		if p.Status != http.StatusOK {
			t.Fatalf("status %d", p.Status)
		}
		rows := regexp.MustCompile(`<tr class="subject" data-id="(\d+)">`).FindAllStringSubmatch(p.Body, -1)
		if len(rows) != 2 || rows[0][1] != fmt.Sprint(f.autumn.ID) || rows[1][1] != fmt.Sprint(f.spring.ID) {
			t.Fatalf("listed %v, want the company's two campaigns by name", rows)
		}
		for _, s := range []string{`id="nav-campaigns"`, `aria-current="page" href="/campaigns"`,
			fmt.Sprintf(`href="/campaigns/%d">Spring sale</a>`, f.spring.ID), `<span class="template">spring_offer</span> (en_US) · Acme support`,
			`<td class="num" data-metric="sent">6</td>`, `<td class="num" data-metric="failed">3</td>`,
			`<td class="num" data-metric="delivered">6<br><span class="muted small">100.0%</span>`,
			`<td class="num" data-metric="replied">1<br><span class="muted small">16.7%</span>`, "Never sent", "2 Jun 2025, 08:00 UTC"} {
			if !strings.Contains(p.Body, s) {
				t.Errorf("the Campaigns page lacks %q", s)
			}
		}
		if strings.Contains(p.Body, "Globex") {
			t.Error("the Campaigns page lists another company's campaign")
		}
	})

	t.Run("report", func(t *testing.T) {
		p := member.get(fmt.Sprintf("/campaigns/%d", f.spring.ID))
		if p.Status != http.StatusOK {
			t.Fatalf("status %d", p.Status)
		}
		// The default: by day, the 30 days to today (the clock is 2 June).
		want := read(record.SubjectCampaign, f.spring.ID, day(2).AddDate(0, 0, -29), day(3), record.IntervalDay)
		if got := figuresOn(p.Body); !sameFigures(got, reportFigures(want)) {
			t.Errorf("the page shows %v, the record has %v", got, reportFigures(want))
		}
		if want.Sent != 6 || want.Delivered != 6 || want.Failed != 3 || want.Replied != 1 || want.Billable != 6 || want.Waiting != 2 {
			t.Errorf("the fixture's report %+v", want.Report)
		}
		exportQuery := "?from=2025-05-04T00%3A00%3A00Z&amp;to=2025-06-03T00%3A00%3A00Z"
		for _, s := range []string{`<h1 id="subject-name">Spring sale</h1>`, `spring_offer <span class="muted">(en_US)</span>`,
			`<dd id="subject-number">Acme support</dd>`, `value="2025-05-04"`, `value="2025-06-02"`, `<option value="day" selected>`,
			"4 May 2025 to 2 Jun 2025, both included, by day.", `data-metric="delivered" data-value="6" data-rate="1"`,
			`data-metric="replied" data-value="1" data-rate="0.1667"`, "16.7% of delivered",
			`<tr class="failure" data-code="131026"><td><code>131026</code></td><td class="reason">Message undeliverable</td><td class="num count">2</td>`,
			`<tr class="failure" data-code="0"><td>–</td>`, `<tr class="category" data-category="marketing"><td>marketing</td><td class="num count">6</td>`,
			fmt.Sprintf(`href="/campaigns/%d/export.csv%s"`, f.spring.ID, exportQuery),
			`<tr data-start="2025-06-01T00:00:00Z"><td>1 Jun 2025</td>`, `<tr data-start="2025-06-02T00:00:00Z"><td>2 Jun 2025</td>`,
			`href="/sends/` + f.first + `"`, `href="/sends/` + f.second + `"`, "to segment VIP customers"} {
			if !strings.Contains(p.Body, s) {
				t.Errorf("the report page lacks %q", s)
			}
		}
		if n := strings.Count(p.Body, `<polyline class="line line-`); n != 5 {
			t.Errorf("the chart has %d lines, want 5", n)
		}
		if n := strings.Count(p.Body, `<circle class="dot dot-sent"`); n != 30 {
			t.Errorf("the chart marks %d days, want 30", n)
		}
		if strings.Index(p.Body, f.second) > strings.Index(p.Body, f.first) {
			t.Error("recent sends are not newest first")
		}
	})

	t.Run("report by hour", func(t *testing.T) {
		p := member.get(fmt.Sprintf("/campaigns/%d?from=2025-06-01&to=2025-06-01&interval=hour", f.spring.ID))
		if p.Status != http.StatusOK {
			t.Fatalf("status %d", p.Status)
		}
		want := read(record.SubjectCampaign, f.spring.ID, day(1), day(2), record.IntervalHour)
		if got := figuresOn(p.Body); !sameFigures(got, reportFigures(want)) || want.Accepted != 9 || want.Sent != 4 {
			t.Errorf("the page shows %v, the record has %v", got, reportFigures(want))
		}
		if n := strings.Count(p.Body, `<circle class="dot dot-failed"`); n != 24 {
			t.Errorf("the chart marks %d hours, want 24", n)
		}
		for _, s := range []string{`<option value="hour" selected>`, `<tr data-start="2025-06-01T10:00:00Z"><td>1 Jun 10:00</td>`, "by hour."} {
			if !strings.Contains(p.Body, s) {
				t.Errorf("the hourly report lacks %q", s)
			}
		}
		empty := member.get(fmt.Sprintf("/campaigns/%d?from=2025-01-01&to=2025-01-31", f.autumn.ID))
		if empty.Status != http.StatusOK || !strings.Contains(empty.Body, "No messages in this range") ||
			!strings.Contains(empty.Body, `id="no-failures"`) || !strings.Contains(empty.Body, `id="no-batches"`) {
			t.Errorf("a report without messages: status %d", empty.Status)
		}
	})

	t.Run("bad range", func(t *testing.T) {
		for _, c := range []struct{ query, want string }{
			{"from=2025-06-02&to=2025-06-01", "The start date is after the end date"},
			{"from=2025-01-01&to=2025-03-01&interval=hour", "By hour, a report covers at most 31 days (744 hours)"},
			{"from=2020-01-01&to=2025-01-01", "A report covers at most 744 days"},
			{"from=yesterday", `The start date &#34;yesterday&#34; is not a date`},
			{"to=2025-13-01", `The end date &#34;2025-13-01&#34; is not a date`},
			{"interval=week", "Show the report by day or by hour."},
		} {
			p := member.get(fmt.Sprintf("/campaigns/%d?%s", f.spring.ID, c.query))
			if p.Status != http.StatusUnprocessableEntity || !strings.Contains(p.Body, `id="range-problem"`) || !strings.Contains(p.Body, c.want) {
				t.Errorf("%s: status %d, want 422 saying %q", c.query, p.Status, c.want)
			}
			if !strings.Contains(p.Body, `<h1 id="subject-name">Spring sale</h1>`) || !strings.Contains(p.Body, `id="range-form"`) ||
				strings.Contains(p.Body, `id="figures"`) || !strings.Contains(p.Body, `href="/sends/`+f.first+`"`) {
				t.Errorf("%s: the page does not name the campaign with the form and its sends, or shows figures", c.query)
			}
		}
	})

	t.Run("not found", func(t *testing.T) {
		for _, path := range []string{
			fmt.Sprintf("/campaigns/%d", f.foreignCampaign.ID),
			fmt.Sprintf("/campaigns/%d?from=2025-06-02&to=2025-06-01", f.foreignCampaign.ID),
			fmt.Sprintf("/automations/%d", f.foreignAutomation.ID),
			"/campaigns/999999", "/campaigns/abc", "/campaigns/0", "/automations/-1",
		} {
			p := member.get(path)
			if p.Status != http.StatusNotFound || !strings.Contains(p.Body, "not found") || strings.Contains(p.Body, "Globex") {
				t.Errorf("%s: status %d, want the 404 page", path, p.Status)
			}
		}
	})

	t.Run("automations", func(t *testing.T) {
		p := member.get("/automations")
		if p.Status != http.StatusOK || !strings.Contains(p.Body, fmt.Sprintf(`href="/automations/%d">Order shipped</a>`, f.automation.ID)) ||
			!strings.Contains(p.Body, `<span class="pill pill-ok">Active</span>`) || !strings.Contains(p.Body, `<td class="num" data-metric="read">3<br>`) ||
			strings.Contains(p.Body, "Globex") {
			t.Fatalf("the Automations page: status %d\n%s", p.Status, p.Body)
		}
		p = member.get(fmt.Sprintf("/automations/%d?from=2025-06-02&to=2025-06-02&interval=hour", f.automation.ID))
		want := read(record.SubjectAutomation, f.automation.ID, day(2), day(3), record.IntervalHour)
		if p.Status != http.StatusOK || !sameFigures(figuresOn(p.Body), reportFigures(want)) || want.Read != 3 {
			t.Fatalf("the automation's report: status %d, shows %v, the record has %v", p.Status, figuresOn(p.Body), reportFigures(want))
		}
		if !strings.Contains(p.Body, `aria-current="page" href="/automations"`) || !strings.Contains(p.Body, `href="/sends/`+f.auto+`"`) ||
			!strings.Contains(p.Body, fmt.Sprintf(`href="/automations/%d/export.csv?from=2025-06-02T00%%3A00%%3A00Z&amp;to=2025-06-03T00%%3A00%%3A00Z"`, f.automation.ID)) {
			t.Error("the automation's report lacks its navigation, its send or its download")
		}
	})

	t.Run("sends name what they send", func(t *testing.T) {
		p := member.get("/sends")
		for _, s := range []string{
			fmt.Sprintf(`campaign <a class="subject-link" href="/campaigns/%d"><span class="name">Spring sale</span></a></span> <span class="segment">to segment <span class="segment-name">VIP customers</span>`, f.spring.ID),
			fmt.Sprintf(`automation <a class="subject-link" href="/automations/%d"><span class="name">Order shipped</span></a>`, f.automation.ID),
		} {
			if !strings.Contains(p.Body, s) {
				t.Errorf("the Sends page lacks %q", s)
			}
		}
		b := member.get("/sends/" + f.first)
		if !strings.Contains(b.Body, fmt.Sprintf(`id="subject-link" href="/campaigns/%d">Spring sale</a>`, f.spring.ID)) ||
			!strings.Contains(b.Body, `<dd id="segment-name">VIP customers</dd>`) {
			t.Error("the batch page does not link its campaign or name its segment")
		}
		b = member.get("/sends/" + f.auto)
		if !strings.Contains(b.Body, fmt.Sprintf(`id="subject-link" href="/automations/%d">Order shipped</a>`, f.automation.ID)) {
			t.Error("the batch page does not link its automation")
		}
	})

	t.Run("admins read the same", func(t *testing.T) {
		admin := e.browser()
		admin.mustSignIn("ada@acme.example")
		a, m := admin.get(fmt.Sprintf("/campaigns/%d", f.spring.ID)), member.get(fmt.Sprintf("/campaigns/%d", f.spring.ID))
		if a.Status != http.StatusOK || !sameFigures(figuresOn(a.Body), figuresOn(m.Body)) {
			t.Errorf("the admin's report: status %d, %v; the member's %v", a.Status, figuresOn(a.Body), figuresOn(m.Body))
		}
	})
}
