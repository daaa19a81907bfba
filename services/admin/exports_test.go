package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/services/admin/internal/console"
)

// downloadRows parses a CSV download: 200, text/csv, a byte order mark
// (for Excel), the header row first.
func downloadRows(t *testing.T, p page) [][]string {
	t.Helper()
	if p.Status != http.StatusOK || p.Header.Get("Content-Type") != "text/csv; charset=utf-8" {
		t.Fatalf("%d %s\n%s", p.Status, p.Header.Get("Content-Type"), p.Body)
	}
	body, ok := strings.CutPrefix(p.Body, "\ufeff")
	if !ok {
		t.Fatal("no byte order mark")
	}
	rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || len(rows) == 0 || !slices.Equal(rows[0], record.ExportColumns) {
		t.Fatalf("%q, %v", rows, err)
	}
	return rows[1:]
}

// TestConsoleDownloads: a signed-in user (a member as well as an admin)
// downloads a send's messages from its page, and a campaign's over a
// range; another company's send or campaign is 404, a bad range 400, and
// a visitor who is not signed in goes to the sign-in page.
func TestConsoleDownloads(t *testing.T) {
	e := newEnv(t, nil)
	f := e.seedSends()
	// The batches' ids carry the real time: a range that ends now (the
	// console's clock) must see them.
	e.Clock.Set(time.Now().Add(time.Minute))
	ctx := context.Background()
	var campaign int64
	if err := e.Pool.QueryRow(ctx, `
		WITH t AS (INSERT INTO templates (company_id, name) VALUES ($1, 'spring_offer') RETURNING id),
		a AS (INSERT INTO messaging_accounts (company_id, name, phone_number_id, access_token_encrypted)
			VALUES ($1, 'Main number', '5550001', '\x00') RETURNING id)
		INSERT INTO campaigns (company_id, name, template_id, messaging_account_id)
		SELECT $1, 'Spring sale', t.id, a.id FROM t, a RETURNING id`, e.CompanyID).Scan(&campaign); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Pool.Exec(ctx, `UPDATE batches SET campaign_id = $2 WHERE id = $1`, f.Completed, campaign); err != nil {
		t.Fatal(err)
	}

	if p := e.browser().get("/sends/" + f.Completed + "/export.csv"); p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/login" {
		t.Fatalf("signed out: %d to %q", p.Status, p.Header.Get("Location"))
	}
	member := e.browser()
	member.mustSignIn("max@acme.example")
	if p := member.get("/sends/" + f.Completed); !strings.Contains(p.Body, `href="/sends/`+f.Completed+`/export.csv"`) ||
		!strings.Contains(p.Body, "Download CSV") {
		t.Fatal("the send's page has no Download CSV link")
	}
	p := member.get("/sends/" + f.Completed + "/export.csv")
	rows := downloadRows(t, p)
	if got := p.Header.Get("Content-Disposition"); got != `attachment; filename="batch-`+f.Completed+`.csv"` {
		t.Fatalf("Content-Disposition %q", got)
	}
	var states []string
	for i, r := range rows {
		if r[1] != f.Completed || r[3] != "Spring sale" || r[7] != fmt.Sprintf("'+3361234%04d", i) {
			t.Fatalf("row %d: %q", i, r)
		}
		states = append(states, r[8])
	}
	if want := []string{"delivered", "delivered", "delivered", "read", "failed", "failed", "skipped_opt_out"}; !slices.Equal(states, want) {
		t.Fatalf("states %q, want %q", states, want)
	}
	if r := rows[4]; r[9] != "131026" || r[10] != "Message undeliverable" || r[15] == "" {
		t.Fatalf("a failed message: %q", r)
	}

	// A campaign's messages over a range, as its report page links them.
	now := time.Now()
	p = member.get(console.ExportLink(record.ExportCampaign, campaign, now.Add(-24*time.Hour), now.Add(time.Hour)))
	if got := downloadRows(t, p); len(got) != 7 || !slices.Equal(got[0], rows[0]) {
		t.Fatalf("the campaign's download: %q", got)
	}
	if !strings.HasPrefix(p.Header.Get("Content-Disposition"), fmt.Sprintf(`attachment; filename="campaign-%d-spring-sale_`, campaign)) {
		t.Fatalf("Content-Disposition %q", p.Header.Get("Content-Disposition"))
	}
	day := now.UTC().Format(time.DateOnly)
	yesterday := now.UTC().Add(-24 * time.Hour).Format(time.DateOnly)
	if got := downloadRows(t, member.get(fmt.Sprintf("/campaigns/%d/export.csv?from=%s", campaign, yesterday))); len(got) != 7 {
		t.Fatalf("from a date (yesterday, UTC) to now: %d rows", len(got))
	}
	var automation int64
	if err := e.Pool.QueryRow(ctx, `INSERT INTO automations (company_id, name) VALUES ($1, 'Order shipped') RETURNING id`,
		e.CompanyID).Scan(&automation); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Pool.Exec(ctx, `UPDATE batches SET automation_id = $2 WHERE id = $1`, f.UnderWay, automation); err != nil {
		t.Fatal(err)
	}
	got := downloadRows(t, member.get(fmt.Sprintf("/automations/%d/export.csv", automation)))
	if len(got) != 7 || got[0][1] != f.UnderWay || got[0][4] != "Order shipped" || got[6][8] != "queued" {
		t.Fatalf("the automation's download (the last 30 days): %q", got)
	}
	if got := downloadRows(t, member.get(fmt.Sprintf("/automations/%d/export.csv?to=2026-01-01", automation))); len(got) != 0 {
		t.Fatalf("before the automation's batch: %q", got)
	}

	for path, status := range map[string]int{
		"/sends/" + f.Foreign + "/export.csv":                                           404,
		"/sends/not-a-batch/export.csv":                                                 404,
		fmt.Sprintf("/campaigns/%d/export.csv", campaign+1000):                          404,
		"/campaigns/x/export.csv":                                                       404,
		fmt.Sprintf("/campaigns/%d/export.csv?from=soon", campaign):                     400,
		fmt.Sprintf("/campaigns/%d/export.csv?from=%s&to=%s", campaign, day, day):       400,
		fmt.Sprintf("/campaigns/%d/export.csv?from=2024-01-01&to=2026-01-01", campaign): 400,
	} {
		p := member.get(path)
		if p.Status != status || strings.Contains(p.Header.Get("Content-Type"), "csv") {
			t.Errorf("%s: %d %s, want %d", path, p.Status, p.Header.Get("Content-Type"), status)
		}
	}
}
