package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// spread is n messages reaching state at evenly spread times from `from`
// to `to` after acceptance.
func spread(n int, state string, from, to time.Duration, code int, title string) []fixtureMsg {
	out := make([]fixtureMsg, n)
	for i := range out {
		at := from
		if n > 1 {
			at += (to - from) * time.Duration(i) / time.Duration(n-1)
		}
		out[i] = fixtureMsg{State: state, At: at, Code: code, Title: title}
	}
	return out
}

// TestBrowserSends drives the Sends pages in headless Chromium: an admin
// opens the list, a batch under way and a completed one (chart, counts,
// failed and skipped messages), cancels the batch under way through its
// confirmation page; a member sees the same pages with nothing to press and
// a forged cancel is refused. Each step is photographed into
// artifacts/screenshots as sends-*.png.
func TestBrowserSends(t *testing.T) {
	exe := chromiumPath(t)
	e := newEnv(t, nil)
	now := time.Date(2025, 6, 2, 9, 30, 0, 0, time.UTC)
	e.Clock.Set(now)
	t0 := now.Add(-40 * time.Minute)
	completed := e.seedBatch(e.CompanyID, "campaign", "/api/campaigns/send", "completed", t0, 0, concat(
		spread(120, "delivered", 20*time.Second, 6*time.Minute, 0, ""),
		spread(60, "read", 2*time.Minute, 11*time.Minute, 0, ""),
		spread(9, "failed", 30*time.Second, 4*time.Minute, 131026, "Message undeliverable"),
		spread(3, "failed", 90*time.Second, 2*time.Minute, 131049, "This message was not delivered to maintain healthy ecosystem engagement"),
		spread(8, "skipped_opt_out", 2*time.Second, 5*time.Second, 0, ""),
	))
	t1 := now.Add(-6 * time.Minute)
	underWay := e.seedBatch(e.CompanyID, "campaign", "/api/campaigns/send", "processing", t1, 0, concat(
		spread(90, "delivered", 15*time.Second, 5*time.Minute, 0, ""),
		spread(25, "read", time.Minute, 5*time.Minute, 0, ""),
		spread(35, "sent", 4*time.Minute, 5*time.Minute+50*time.Second, 0, ""),
		spread(4, "failed", time.Minute, 3*time.Minute, 131026, "Message undeliverable"),
		spread(146, "queued", time.Second, time.Second, 0, ""),
	))
	_ = e.seedBatch(e.CompanyID, "automation", "/api/automations/trigger", "completed", t0.Add(-time.Hour), 0,
		spread(3, "read", 5*time.Second, 20*time.Second, 0, ""))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := newBrowserRun(t, ctx, exe, "sends")
	tab, do, submit, count, shot := b.tab, b.do, b.submit, b.count, b.shot
	// text folds the white space inside too.
	text := func(sel chromedp.CSS) string {
		t.Helper()
		return strings.Join(strings.Fields(b.text(sel)), " ")
	}
	// stateCount is the count the batch page shows for a state.
	stateCount := func(state string) string {
		t.Helper()
		return text(chromedp.CSS(fmt.Sprintf(`#state-counts li[data-state=%q] .count`, state)))
	}
	signIn := func(email string) {
		t.Helper()
		b.signIn(e.URL+"/login", email)
	}

	// The list, from the sidebar.
	signIn("ada@acme.example")
	do("lands on Sends", chromedp.WaitVisible(chromedp.ID("sends")))
	if url := b.location(); !strings.HasSuffix(url, "/sends") {
		t.Fatalf("sign-in lands on %s, want /sends", url)
	}
	if n := count(`#sends tr.batch`); n != 3 {
		t.Fatalf("the Sends page lists %d batches, want 3", n)
	}
	row := func(id string) string { return fmt.Sprintf(`#sends tr[data-batch-id=%q]`, id) }
	if s := text(chromedp.CSS(row(underWay) + ` .status`)); s != "Sending" {
		t.Fatalf("the batch under way shows %q", s)
	}
	if s := text(chromedp.CSS(row(completed) + ` .status`)); s != "Completed" {
		t.Fatalf("the completed batch shows %q", s)
	}
	if n := count(row(underWay) + ` .cancel-link`); n != 1 {
		t.Fatal("no cancel for the batch under way")
	}
	if n := count(row(completed) + ` .cancel-link`); n != 0 {
		t.Fatal("cancel offered for a completed batch")
	}
	if n := count(row(underWay) + ` svg.progress rect.seg`); n != 5 {
		t.Fatalf("the progress bar of the batch under way has %d segments, want 5", n)
	}
	shot("list")

	// A batch under way: counts, chart, the failures so far.
	do("open the batch under way", chromedp.Click(chromedp.CSS(row(underWay)+` a.batch-link`)), chromedp.WaitVisible(chromedp.ID("timeline")))
	if got := text(`#batch-status`); got != "Sending" {
		t.Fatalf("status %q", got)
	}
	for state, want := range map[string]string{"queued": "146", "sent": "35", "delivered": "90", "read": "25", "failed": "4"} {
		if got := stateCount(state); got != want {
			t.Errorf("batch under way: %s shows %s, want %s", state, got, want)
		}
	}
	if n := count(`#timeline polygon.area`); n != 5 {
		t.Errorf("the chart of the batch under way has %d areas, want 5 (waiting, sent, delivered, read, failed)", n)
	}
	if n := count(`#problems tr.problem`); n != 4 {
		t.Errorf("%d failed messages listed, want 4", n)
	}
	shot("under-way")

	// The completed batch: its failed and skipped messages and why.
	do("open the completed batch", chromedp.Navigate(e.URL+"/sends/"+completed), chromedp.WaitVisible(chromedp.ID("timeline")))
	if got := text(`#batch-status`); got != "Completed" {
		t.Fatalf("status %q", got)
	}
	if n := count(`#problems tr.problem[data-state="failed"]`); n != 12 {
		t.Errorf("%d failed messages listed, want 12", n)
	}
	if n := count(`#problems tr.problem[data-state="skipped_opt_out"]`); n != 8 {
		t.Errorf("%d skipped messages listed, want 8", n)
	}
	if reasons := text(`#problems tbody`); !strings.Contains(reasons, "131049 This message was not delivered to maintain healthy ecosystem engagement") ||
		!strings.Contains(reasons, "The contact opted out of campaigns") {
		t.Errorf("reasons listed: %q", reasons)
	}
	if n := count(`#cancel-batch`); n != 0 {
		t.Error("cancel offered for a completed batch")
	}
	label, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById("timeline").getAttribute("aria-label")`))
	if err != nil || !strings.HasSuffix(label, "at the end: Delivered 120, Read 60, Failed 12, Skipped (opted out) 8") {
		t.Errorf("chart summary %q (%v)", label, err)
	}
	shot("completed")

	// Cancel the batch under way, through its confirmation page.
	do("open the batch under way again", chromedp.Navigate(e.URL+"/sends/"+underWay), chromedp.WaitVisible(chromedp.ID("cancel-batch")))
	e.Clock.Advance(30 * time.Second)
	do("open the cancel confirmation", chromedp.Click(chromedp.ID("cancel-batch")), chromedp.WaitVisible(chromedp.ID("confirm-cancel")))
	if got := text(`#cancel-count`); got != "146 messages not yet handed to WhatsApp will not be sent." {
		t.Fatalf("the confirmation says %q", got)
	}
	shot("cancel-confirm")
	submit("confirm the cancel", `#confirm-cancel`, http.StatusOK)
	do("the batch page after the cancel", chromedp.WaitVisible(chromedp.ID("cancelled-at")))
	if got := text(`.alert-ok`); got != "Send cancelled: 146 messages will not be sent." {
		t.Fatalf("notice %q", got)
	}
	// Some messages had been sent: completed, with a cancelled count.
	if got := text(`#batch-status`); got != "Completed" {
		t.Fatalf("status after the cancel %q", got)
	}
	for state, want := range map[string]string{"cancelled": "146", "sent": "35", "delivered": "90", "read": "25", "failed": "4"} {
		if got := stateCount(state); got != want {
			t.Errorf("cancelled batch: %s shows %s, want %s", state, got, want)
		}
	}
	if n := count(`#state-counts li[data-state="queued"]`) + count(`#cancel-batch`); n != 0 {
		t.Error("the cancelled batch still shows queued messages or a cancel button")
	}
	if n := count(`#timeline polygon.area-cancelled`); n != 1 {
		t.Error("the chart has no cancelled area")
	}
	var states map[string]int
	if states = e.messageStates(underWay); states["cancelled"] != 146 || states["queued"] != 0 || states["sent"] != 35 {
		t.Fatalf("in the database after the cancel: %v", states)
	}
	shot("cancelled")

	// A member: the same pages, nothing to press, a forged cancel refused.
	submit("sign out", `.account button[type=submit]`, http.StatusOK)
	pending := e.seedBatch(e.CompanyID, "batch", "/api/batches", "processing", now.Add(-time.Minute), 0,
		spread(20, "queued", time.Second, time.Second, 0, ""))
	signIn("max@acme.example")
	do("member lands on Sends", chromedp.WaitVisible(chromedp.ID("sends")))
	if n := count(`#sends tr.batch`); n != 4 {
		t.Fatalf("the member's Sends page lists %d batches, want 4", n)
	}
	if n := count(`.cancel-link, #cancel-batch, form[action$="/cancel"]`); n != 0 {
		t.Fatalf("a member's Sends page has %d cancel controls", n)
	}
	if got := text(`.notice`); !strings.Contains(got, "Only admins of Acme Retail can cancel a send.") {
		t.Fatalf("member notice %q", got)
	}
	shot("member-list")
	status, err := chromedp.Run(tab, chromedp.Evaluate[int](fmt.Sprintf(`fetch(%q, {method: "POST", body: new URLSearchParams({confirm: "yes"})}).then(r => r.status)`,
		"/sends/"+pending+"/cancel"), chromedp.EvalAwaitPromise))
	if err != nil || status != http.StatusForbidden {
		t.Fatalf("a member's forged cancel: status %d, %v; want 403", status, err)
	}
	if got := e.messageStates(pending); got["queued"] != 20 || len(got) != 1 {
		t.Fatalf("the member's forged cancel changed the batch: %v", got)
	}
}
