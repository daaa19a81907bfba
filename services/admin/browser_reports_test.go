package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/parleyhq/parley/pkg/apikey"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/pkg/secretbox"
)

// TestBrowserReports sends a campaign through the real stack (the gateway,
// the campaign dispatcher and provider-sim, built once per test binary):
// a contact who wrote STOP before it is skipped, six numbers are
// undeliverable (131026), the rest are delivered, billed and read, and
// three contacts answer. A member then opens Campaigns from the sidebar
// and the campaign's report in headless Chromium, by day and by hour,
// and every figure, failure and billing row the page shows is checked
// against the gateway's GET /api/campaigns/{id}/report for the same range
// (and the record's). A range that cannot be shown says why on the page;
// the Sends list and the batch page name the campaign and lead to its
// report. Each step is photographed into artifacts/screenshots as
// reports-NN-*.png.
func TestBrowserReports(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway, the campaign dispatcher and provider-sim")
	}
	exe := chromiumPath(t)
	e := newEnv(t, nil)
	now := time.Now().UTC()
	e.Clock.Set(now)
	ctx := context.Background()
	gw := e.startGateway()
	dispatcherBin := serviceBinary(t, "dispatcher/cmd/campaign-dispatcher")
	simBin := serviceBinary(t, "provider-sim")

	var pnid string
	if err := e.Pool.QueryRow(ctx, `SELECT phone_number_id FROM messaging_accounts WHERE company_id = $1`, e.CompanyID).Scan(&pnid); err != nil {
		t.Fatal(err)
	}
	simAddr := privateAddr(t)
	sim := "http://" + simAddr
	startService(t, "provider-sim", simBin, sim+"/_sim/stats",
		"PARLEY_PROVIDER_SIM_ADDR="+simAddr,
		"PARLEY_PROVIDER_SIM_ACCOUNTS="+pnid+":test-token",
		"PARLEY_PROVIDER_SIM_CALLBACK_URL="+gw.url+"/webhooks/whatsapp",
		"PARLEY_PROVIDER_SIM_APP_SECRET="+whatsapp.DevAppSecret,
		"PARLEY_PROVIDER_SIM_UNDELIVERABLE=1555999*",
		"PARLEY_PROVIDER_SIM_SENT_DELAY=10ms", "PARLEY_PROVIDER_SIM_DELIVERED_DELAY=50ms", "PARLEY_PROVIDER_SIM_READ_DELAY=100ms",
		"PARLEY_LOG_LEVEL=warn")
	e.startCampaignDispatcher(t, dispatcherBin, gw, sim)
	box, err := secretbox.New(secretbox.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := catalog.NewStore(e.Pool, box).CreateAutomation(ctx, catalog.NewAutomation{CompanyID: e.CompanyID, Name: "Order shipped"}); err != nil {
		t.Fatal(err)
	}
	full, _, err := e.Keys.Create(ctx, e.CompanyID, apikey.Actor{Label: "reports"})
	if err != nil {
		t.Fatal(err)
	}
	reply := func(from, text string) {
		t.Helper()
		var res struct {
			ReceiverStatus int `json:"receiver_status"`
		}
		if st := httpJSON(t, http.MethodPost, sim+"/_sim/replies", map[string]any{"phone_number_id": pnid, "from": from, "text": text}, &res); st != http.StatusOK || res.ReceiverStatus != http.StatusOK {
			t.Fatalf("%s writes %q: %d, the gateway answered %d", from, text, st, res.ReceiverStatus)
		}
	}

	// A contact opts out first; then the campaign goes to 30 numbers.
	const stopped = "+15550001000"
	reply(stopped, "STOP")
	phones := []string{stopped}
	for i := 1; i < 24; i++ {
		phones = append(phones, fmt.Sprintf("+1555000%04d", 1000+i))
	}
	for i := range 6 {
		phones = append(phones, fmt.Sprintf("+1555999%04d", i))
	}
	var accepted struct {
		BatchID string `json:"batch_id"`
	}
	if st := httpJSON(t, http.MethodPost, gw.url+"/api/campaigns/send", map[string]any{"campaign_id": gw.campaignID, "contacts": phones},
		&accepted, "service-api-key", full); st != http.StatusAccepted {
		t.Fatalf("campaign send: %d", st)
	}
	batchID := accepted.BatchID
	eventually(t, "every message settles, read or failed", 60*time.Second, func() bool {
		c := e.messageStates(batchID)
		return c["read"] == 23 && c["failed"] == 6 && c["skipped_opt_out"] == 1
	})
	for _, p := range phones[1:4] {
		reply(p, "Thanks, see you there!")
	}

	// The range the page shows by default: by day, the 30 days to today (UTC).
	today := now.Truncate(24 * time.Hour)
	dayFrom, dayTo := today.AddDate(0, 0, -29), today.AddDate(0, 0, 1)
	apiReport := func(from, to time.Time, interval string) record.SubjectReport {
		t.Helper()
		var rep record.SubjectReport
		q := url.Values{"from": {from.Format(time.RFC3339)}, "to": {to.Format(time.RFC3339)}, "interval": {interval}}
		if st := httpJSON(t, http.MethodGet, fmt.Sprintf("%s/api/campaigns/%d/report?%s", gw.url, gw.campaignID, q.Encode()), nil, &rep,
			"service-api-key", full); st != http.StatusOK {
			t.Fatalf("GET the report: %d", st)
		}
		direct, err := record.ReadSubjectReport(ctx, e.Pool, record.ReportQuery{CompanyID: e.CompanyID, SubjectKind: record.SubjectCampaign,
			SubjectID: gw.campaignID, From: from, To: to, Interval: interval, Location: time.UTC})
		if err != nil || !sameFigures(reportFigures(rep), reportFigures(direct)) {
			t.Fatalf("the API's report %v, the record's %v (%v)", reportFigures(rep), reportFigures(direct), err)
		}
		return rep
	}
	var want record.SubjectReport
	eventually(t, "the three replies are counted", 10*time.Second, func() bool {
		want = apiReport(dayFrom, dayTo, record.IntervalDay)
		return want.Replied == 3
	})
	if want.Accepted != 30 || want.Sent != 29 || want.Delivered != 23 || want.Read != 23 || want.Failed != 6 || want.SkippedOptOut != 1 ||
		want.Billable != 23 || want.Waiting != 0 {
		t.Fatalf("the campaign's report %v: want 30 accepted, 29 sent, 23 delivered, billed and read, 6 failed, 1 skipped, 3 replied", reportFigures(want))
	}

	ctxB, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	b := newBrowserRun(t, ctxB, exe, "reports")
	tab, do, submit, count, shot := b.tab, b.do, b.submit, b.count, b.shot
	text := func(sel chromedp.CSS) string {
		t.Helper()
		return strings.Join(strings.Fields(b.text(sel)), " ")
	}
	// shown reads the totals the page shows, as figuresOn does, from the DOM.
	shown := func() map[string]int64 {
		t.Helper()
		pairs, err := chromedp.Run(tab, chromedp.Evaluate[[][]string](`[...document.querySelectorAll("#figures .figure"), document.getElementById("waiting")]
			.map(d => [d.dataset.metric || "waiting", d.dataset.value])`))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, p := range pairs {
			out[p[0]], _ = strconv.ParseInt(p[1], 10, 64)
		}
		return out
	}
	rows := func(sel string) []string {
		t.Helper()
		out, err := chromedp.Run(tab, chromedp.Evaluate[[]string](fmt.Sprintf(`[...document.querySelectorAll(%q)].map(r => r.innerText.replace(/\s+/g, " ").trim())`, sel)))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	checkAgainst := func(what string, rep record.SubjectReport) {
		t.Helper()
		if got := shown(); !sameFigures(got, reportFigures(rep)) {
			t.Errorf("%s: the page shows %v, the API %v", what, got, reportFigures(rep))
		}
		var failures []string
		for _, f := range rep.Failures {
			failures = append(failures, fmt.Sprintf("%d %s %d", f.Code, f.Title, f.Count))
		}
		if got := rows(`#failures tbody tr`); strings.Join(got, "|") != strings.Join(failures, "|") {
			t.Errorf("%s: failures %q, the API's %q", what, got, failures)
		}
		var billing []string
		for _, c := range rep.Billing {
			billing = append(billing, fmt.Sprintf("%s %d", c.Category, c.Count))
		}
		if got := rows(`#billing tbody tr`); strings.Join(got, "|") != strings.Join(billing, "|") {
			t.Errorf("%s: billing %q, the API's %q", what, got, billing)
		}
		var rates []string
		for _, r := range []*float64{rep.Rates.Delivered, rep.Rates.Read, rep.Rates.Replied} {
			rates = append(rates, strconv.FormatFloat(*r, 'f', -1, 64))
		}
		got, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`["delivered", "read", "replied"].map(m => document.querySelector('#figures .figure[data-metric="' + m + '"]').dataset.rate)`))
		if err != nil || strings.Join(got, " ") != strings.Join(rates, " ") {
			t.Errorf("%s: rates %q, the API's %q (%v)", what, got, rates, err)
		}
	}

	b.signIn(e.URL+"/login", "max@acme.example")
	do("open Campaigns from the sidebar", chromedp.Click(chromedp.ID("nav-campaigns")), chromedp.WaitVisible(chromedp.ID("subjects")))
	row := fmt.Sprintf(`#subjects tr[data-id="%d"]`, gw.campaignID)
	for metric, v := range map[string]int64{"sent": 29, "delivered": 23, "read": 23, "replied": 3, "failed": 6} {
		if got := text(chromedp.CSS(fmt.Sprintf(`%s td[data-metric=%q]`, row, metric))); !strings.HasPrefix(got, strconv.FormatInt(v, 10)) {
			t.Errorf("the Campaigns page shows %s %q, want %d", metric, got, v)
		}
	}
	shot("campaigns")

	do("open the campaign's report", chromedp.Click(chromedp.CSS(row+` a.subject-link`)), chromedp.WaitVisible(chromedp.ID("report-chart")))
	if got := text(`#subject-name`); got != "Spring sale" {
		t.Fatalf("the report is of %q", got)
	}
	if got := text(`#subject-template`); got != "hello (en_US)" && !strings.HasPrefix(got, "hello (") {
		t.Errorf("template %q", got)
	}
	checkAgainst("by day", want)
	if n := count(`#report-chart polyline.line`); n != 5 {
		t.Errorf("the chart has %d lines, want 5", n)
	}
	href, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById("export-csv").getAttribute("href")`))
	if wantHref := fmt.Sprintf("/campaigns/%d/export.csv?from=%s&to=%s", gw.campaignID, url.QueryEscape(dayFrom.Format(time.RFC3339)),
		url.QueryEscape(dayTo.Format(time.RFC3339))); err != nil || href != wantHref {
		t.Errorf("the CSV link is %q, want %q (%v)", href, wantHref, err)
	}
	// The link downloads the campaign's messages: a header and one line each.
	lines, err := chromedp.Run(tab, chromedp.Evaluate[int](`fetch(document.getElementById("export-csv").href)
		.then(r => r.ok ? r.text() : "").then(t => t.trim().split("\r\n").length)`, chromedp.EvalAwaitPromise))
	if err != nil || int64(lines) != want.Accepted+1 {
		t.Errorf("the CSV download has %d lines (%v), want a header and %d messages", lines, err, want.Accepted)
	}
	if got := rows(`#recent-batches tbody tr a.batch-link`); len(got) != 1 || got[0] != batchID {
		t.Errorf("recent sends %q, want the batch %s", got, batchID)
	}
	shot("report-by-day")

	// By hour: yesterday and today.
	do("choose by hour", chromedp.SetValue(chromedp.ID("interval"), "hour"), chromedp.SetValue(chromedp.ID("from"), today.AddDate(0, 0, -1).Format("2006-01-02")))
	submit("show by hour", `#show-report`, http.StatusOK)
	do("the hourly report", chromedp.WaitVisible(chromedp.ID("report-chart")))
	checkAgainst("by hour", apiReport(today.AddDate(0, 0, -1), dayTo, record.IntervalHour))
	if n := count(`#report-chart circle.dot-sent`); n != 48 {
		t.Errorf("the hourly chart marks %d hours, want 48", n)
	}
	do("open the figures by hour", chromedp.Click(chromedp.CSS(`.series-details summary`)))
	if got := rows(`#series tbody tr`); len(got) == 0 || len(got) > 2 {
		t.Errorf("the hours listed: %q", got)
	}
	shot("report-by-hour")

	// A range that cannot be shown says why, and keeps the form.
	do("choose a start after the end", chromedp.SetValue(chromedp.ID("from"), today.AddDate(0, 0, 3).Format("2006-01-02")))
	submit("show a bad range", `#show-report`, http.StatusUnprocessableEntity)
	if got := text(`#range-problem`); !strings.HasPrefix(got, "The start date is after the end date") {
		t.Errorf("the bad range says %q", got)
	}
	if count(`#figures`) != 0 || count(`#range-form`) != 1 {
		t.Error("a bad range shows figures, or no form")
	}
	shot("bad-range")

	// The Sends list names the campaign and leads to its report; so does the batch page.
	do("open Sends", chromedp.Click(chromedp.ID("nav-sends")), chromedp.WaitVisible(chromedp.ID("sends")))
	sendRow := fmt.Sprintf(`#sends tr[data-batch-id=%q]`, batchID)
	if got := text(chromedp.CSS(sendRow + ` td:first-child`)); !strings.HasPrefix(got, "Campaign send · campaign Spring sale") {
		t.Errorf("the Sends list says %q", got)
	}
	shot("sends")
	do("open the batch", chromedp.Click(chromedp.CSS(sendRow+` a.batch-link`)), chromedp.WaitVisible(chromedp.ID("subject-link")))
	shot("batch")
	do("follow its campaign", chromedp.Click(chromedp.ID("subject-link")), chromedp.WaitVisible(chromedp.ID("report-chart")))
	checkAgainst("from the batch page", want)

	do("open Automations", chromedp.Click(chromedp.ID("nav-automations")), chromedp.WaitVisible(chromedp.ID("subjects")))
	if got := text(`#subjects tbody tr`); !strings.Contains(got, "Order shipped") || !strings.Contains(got, "Never sent") {
		t.Errorf("the Automations page says %q", got)
	}
	shot("automations")

	res, err := chromedp.RunResponse(tab, chromedp.Navigate(e.URL+"/campaigns/999999"))
	if err != nil || res.Status != http.StatusNotFound || text(`#error-title`) != "Campaign not found" {
		t.Errorf("an unknown campaign: %v %v", res, err)
	}
}
