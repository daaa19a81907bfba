package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/parleyhq/parley/pkg/webhooks"
)

// TestBrowserWebhooks drives the Webhooks page in headless Chromium: an
// admin adds an endpoint (a refused URL first), sees its secret once, sends
// a test event; the sender's failure and the disabling show on the
// endpoint's page, the admin enables it again; a member sees it read-only.
// Each step is photographed into artifacts/screenshots/webhooks-*.png.
func TestBrowserWebhooks(t *testing.T) {
	exe := chromiumPath(t)
	e := newEnv(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := newBrowserRun(t, ctx, exe, "webhooks")
	tab, do, submit, text, count, shot := b.tab, b.do, b.submit, b.text, b.count, b.shot
	signIn := func(email string) {
		t.Helper()
		b.signIn(e.URL+"/", email)
	}

	signIn("ada@acme.example")
	do("open Webhooks from the sidebar", chromedp.Click(chromedp.CSS(`a.nav-item[href="`+webhooksPath+`"]`)), chromedp.WaitVisible(chromedp.ID("no-endpoints")))
	shot("empty")

	do("type a loopback URL", chromedp.SendKeys(chromedp.ID("url"), "https://127.0.0.1/hook"))
	submit("add a loopback endpoint", `#create`, http.StatusUnprocessableEntity)
	if msg := text(`.field-error`); !strings.Contains(msg, "loopback") {
		t.Fatalf("refusal says %q", msg)
	}
	shot("refused-url")

	do("fill the form",
		chromedp.Clear(chromedp.ID("url")),
		chromedp.SendKeys(chromedp.ID("url"), "https://93.184.215.14/parley"),
		chromedp.SendKeys(chromedp.ID("description"), "CRM"),
		chromedp.Click(chromedp.CSS(`input[name=event_types][value="message.failed"]`)),
		chromedp.Click(chromedp.CSS(`input[name=event_types][value="batch.completed"]`)))
	submit("add the endpoint", `#create`, http.StatusOK)
	secret := text(`#new-secret`)
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("the page shows %q as the secret", secret)
	}
	shot("secret-once")
	ep := e.onlyEndpoint(t)
	if strings.Join(ep.EventTypes, ",") != "message.failed,batch.completed" || ep.Description != "CRM" {
		t.Fatalf("created %+v", ep)
	}

	submit("leave the one-time panel", `#new-secret-panel a.btn`, http.StatusOK)
	do("endpoint page", chromedp.WaitVisible(chromedp.ID("no-attempts")))
	if n := count(`#new-secret`); n != 0 {
		t.Fatal("the secret is still shown")
	}
	do("choose the test type", chromedp.SetValue(chromedp.ID("event_type"), "message.failed"))
	submit("send a test event", `#send-test`, http.StatusOK)
	if notice := text(`.alert-ok`); !strings.Contains(notice, "message.failed test event was queued") {
		t.Fatalf("notice %q", notice)
	}

	// The sender tries, fails, and disables the endpoint.
	s := e.webhookStore()
	ds, err := s.Deliveries(ctx, e.CompanyID, ep.ID, webhooks.StatusPending, 10)
	if err != nil || len(ds) != 1 {
		t.Fatalf("pending deliveries: %d, %v", len(ds), err)
	}
	code := 503
	if err := s.RecordAttempt(ctx, webhooks.AttemptResult{DeliveryID: ds[0].ID, ResponseCode: &code, Latency: 143 * time.Millisecond,
		Excerpt: `{"error":"maintenance"}`, At: e.Clock.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := s.Disable(ctx, ep.ID, "every delivery failed for 3 days", ""); err != nil {
		t.Fatal(err)
	}
	do("reload", chromedp.Navigate(e.URL+webhooksPath+"/"+ep.ID), chromedp.WaitVisible(chromedp.ID("disabled-notice")))
	if notice := text(`#disabled-notice`); !strings.Contains(notice, "every delivery failed for 3 days") || !strings.Contains(notice, "HTTP 503") {
		t.Fatalf("disabled notice %q", notice)
	}
	if row := text(`#attempts tbody tr`); !strings.Contains(row, "503") || !strings.Contains(row, "143 ms") || !strings.Contains(row, "maintenance") {
		t.Fatalf("attempt row %q", row)
	}
	shot("disabled-with-attempts")
	submit("enable", `#enable`, http.StatusOK)
	if n := count(`#disabled-notice`); n != 0 {
		t.Fatal("still disabled after enabling")
	}
	shot("enabled")

	submit("sign out", `.account button[type=submit]`, http.StatusOK)
	signIn("max@acme.example")
	do("member's webhooks page", chromedp.Navigate(e.URL+webhooksPath), chromedp.WaitVisible(chromedp.ID("endpoints")))
	if n := count(`#create-endpoint`); n != 0 {
		t.Fatal("a member sees the create form")
	}
	do("member's endpoint page", chromedp.Navigate(e.URL+webhooksPath+"/"+ep.ID), chromedp.WaitVisible(chromedp.ID("attempts")))
	if n := count(`#edit-endpoint, #rotate, #delete, #send-test, #replay`); n != 0 {
		t.Fatalf("a member's page has %d endpoint actions", n)
	}
	shot("member-read-only")
	status, err := chromedp.Run(tab, chromedp.Evaluate[int](fmt.Sprintf(`fetch(%q, {method: "POST", body: new URLSearchParams({confirm: "yes"})}).then(r => r.status)`,
		webhooksPath+"/"+ep.ID+"/delete"), chromedp.EvalAwaitPromise))
	if err != nil || status != http.StatusForbidden {
		t.Fatalf("a member's forged delete: %d, %v", status, err)
	}
	e.onlyEndpoint(t)
}
