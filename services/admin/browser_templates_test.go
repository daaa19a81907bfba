package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/parleyhq/parley/pkg/record"
)

const browserComponents = `[{"type": "BODY", "text": "Hi {{1}}, your order {{2}} has shipped."}]`

// TestBrowserTemplates drives the Templates and Numbers pages in headless
// Chromium: an admin creates a template (a refused one first), which goes
// to provider-sim PENDING; WhatsApp pauses it (recorded as the webhook
// would) and the page shows the pause, its end and its history; the
// Numbers page shows each number's quality and its portfolio's tier; a
// member sees no create form and a forged one is refused. Each step is
// photographed into artifacts/screenshots/templates-*.png.
func TestBrowserTemplates(t *testing.T) {
	exe := chromiumPath(t)
	e := newEnv(t, nil)
	main := e.number("Main line", "2001", "7001")
	e.number("Support", "2002", "7001")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := newBrowserRun(t, ctx, exe, "templates")
	tab, do, submit, text, count, shot := b.tab, b.do, b.submit, b.text, b.count, b.shot

	b.signIn(e.URL+"/", "ada@acme.example")
	do("open Templates from the sidebar", chromedp.Click(chromedp.ID("nav-templates")), chromedp.WaitVisible(chromedp.ID("no-templates")))
	shot("empty")

	do("fill the form with one binding too few",
		chromedp.SendKeys(chromedp.ID("name"), "order_update"),
		chromedp.SetValue(chromedp.ID("components"), browserComponents),
		chromedp.SetValue(chromedp.ID("body_parameters"), `[{"source": "first_name", "default": "there"}]`))
	submit("create a template with a binding missing", `#create`, http.StatusUnprocessableEntity)
	if msg := text(`.field-error`); !strings.Contains(msg, "2 variables and 1 bindings") {
		t.Fatalf("refusal says %q", msg)
	}
	shot("refused")
	do("add the binding", chromedp.SetValue(chromedp.ID("body_parameters"),
		`[{"source": "first_name", "default": "there"}, {"source": "variable", "name": "order_id"}]`))
	submit("create the template", `#create`, http.StatusOK)
	if notice := text(`.alert-ok`); !strings.Contains(notice, "order_update (en_US) was submitted") {
		t.Fatalf("notice %q", notice)
	}
	if st := text(`#template-status`); st != "PENDING" {
		t.Fatalf("status %q", st)
	}
	shot("pending")
	var id int64
	var pid string
	if err := e.Pool.QueryRow(ctx, `SELECT id, provider_template_id FROM templates WHERE name = 'order_update'`).Scan(&id, &pid); err != nil {
		t.Fatal(err)
	}
	if st, ok := e.Sim.TemplateByID(pid); !ok || st.WABAID != "7001" || st.Status != "PENDING" {
		t.Fatalf("the provider has %+v", st)
	}

	until := time.Now().Add(3 * time.Hour).UTC().Truncate(time.Second)
	for _, c := range []record.TemplateChange{
		{Status: "APPROVED", Source: record.SourceWebhook},
		{Status: "PAUSED", Reason: "FIRST_PAUSE", PausedUntil: until, Source: record.SourceWebhook},
	} {
		c.CompanyID, c.TemplateID = e.CompanyID, id
		if _, err := record.ApplyTemplateChange(ctx, e.Pool, c); err != nil {
			t.Fatal(err)
		}
	}
	do("reload the template", chromedp.Navigate(e.URL+"/templates/"+strconv.FormatInt(id, 10)), chromedp.WaitVisible(chromedp.ID("paused-notice")))
	if notice := text(`#paused-notice`); !strings.Contains(notice, "FIRST_PAUSE") || !strings.Contains(notice, until.Format("2 Jan 2006, 15:04 UTC")) {
		t.Fatalf("paused notice %q", notice)
	}
	if n := count(`#history tbody tr`); n != 3 {
		t.Fatalf("history has %d rows", n)
	}
	shot("paused-with-history")
	do("back to the list", chromedp.Click(chromedp.ID("nav-templates")), chromedp.WaitVisible(chromedp.ID("templates")))
	if row := text(`#templates tbody tr`); !strings.Contains(row, "PAUSED") || !strings.Contains(row, "FIRST_PAUSE") || !strings.Contains(row, "Main line (2001)") {
		t.Fatalf("list row %q", row)
	}

	if _, err := e.Pool.Exec(ctx, `UPDATE messaging_accounts SET quality_rating = 'YELLOW', quality_updated_at = now() WHERE id = $1`, main.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Pool.Exec(ctx, `INSERT INTO portfolios (company_id, portfolio_id, tier, source) VALUES ($1, '7001', 'TIER_2K', 'provider')`, e.CompanyID); err != nil {
		t.Fatal(err)
	}
	do("open Numbers", chromedp.Click(chromedp.ID("nav-numbers")), chromedp.WaitVisible(chromedp.CSS(`section.portfolio`)))
	if h := text(`section.portfolio h2`); !strings.Contains(h, "TIER_2K") || !strings.Contains(h, "2000 users") || !strings.Contains(h, "provider") {
		t.Fatalf("portfolio heading %q", h)
	}
	if q := text(`tr[data-number="2001"] .quality`); q != "YELLOW" {
		t.Fatalf("quality %q", q)
	}
	shot("numbers")

	submit("sign out", `.account button[type=submit]`, http.StatusOK)
	b.signIn(e.URL+"/", "max@acme.example")
	do("member's templates", chromedp.Navigate(e.URL+"/templates"), chromedp.WaitVisible(chromedp.ID("templates")))
	if n := count(`#create-template`); n != 0 {
		t.Fatal("a member sees the create form")
	}
	status, err := chromedp.Run(tab, chromedp.Evaluate[int](fmt.Sprintf(`fetch("/templates", {method: "POST", body: new URLSearchParams({name: "x", components: %q})}).then(r => r.status)`,
		browserComponents), chromedp.EvalAwaitPromise))
	if err != nil || status != http.StatusForbidden {
		t.Fatalf("a member's forged create: %d, %v", status, err)
	}
	if n := e.templateCount(); n != 1 {
		t.Fatalf("%d templates", n)
	}
}
