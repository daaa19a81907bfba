package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
	"github.com/parleyhq/parley/pkg/record"
)

// csvRows parses a CSV answer: 200, text/csv, the header row first.
func csvRows(t *testing.T, r response) [][]string {
	t.Helper()
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "text/csv; charset=utf-8" {
		t.Fatalf("%d %s: %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	rows, err := csv.NewReader(bytes.NewReader(r.body)).ReadAll()
	if err != nil {
		t.Fatalf("the export is not CSV: %v\n%s", err, r.body)
	}
	if len(rows) == 0 || !slices.Equal(rows[0], record.ExportColumns) {
		t.Fatalf("header %q", rows)
	}
	if !bytes.HasSuffix(r.body, []byte("\r\n")) {
		t.Fatal("lines do not end with CRLF")
	}
	return rows[1:]
}

// TestExportEndToEnd sends a campaign through the real stack (gateway,
// dispatchers, provider-sim calling back with pricing), a contact answers
// it, and the company downloads the batch, the campaign and all its
// messages as CSV: one row per message in batch order, with its outcome,
// its pricing and the reply, phones quoted against formula injection.
// Another company's batch or campaign is 404, a bad range 422, and a
// second export within 10 seconds 429.
func TestExportEndToEnd(t *testing.T) {
	s := newStack(t)
	co := s.serve("export")
	phones := []string{"+393330000601", "+393330000602", "+393330000603"}
	r := s.post("/api/campaigns/send", co.key, campaignBody(co.campaign.ID, phones...))
	if r.status != 202 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	id := r.json(t)["batch_id"].(string)
	s.waitBatch(co.key, id, 30*time.Second, func(b map[string]any) bool {
		// Read, the simulator's last callback: the exports below compare
		// rows of a record that no longer changes.
		return completed(b) && counts(b)["read"] == 3
	})
	// The second contact answers, quoting the message (its wamid).
	ctx := context.Background()
	var wamid string
	if err := s.pool.QueryRow(ctx, `SELECT provider_message_id FROM messages WHERE batch_id = $1 AND seq = 1`, id).Scan(&wamid); err != nil {
		t.Fatal(err)
	}
	s.reply(co, whatsappsim.Reply{From: phones[1], Name: "Ana", Text: "Yes please", Context: wamid})
	deadline := time.Now().Add(10 * time.Second)
	for replied := false; !replied; time.Sleep(20 * time.Millisecond) {
		if err := s.pool.QueryRow(ctx, `SELECT replied_at IS NOT NULL FROM messages WHERE batch_id = $1 AND seq = 1`, id).Scan(&replied); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the reply was not recorded on its message")
		}
	}

	r = s.do(http.MethodGet, "/api/batches/"+id+"/export", co.key, nil)
	rows := csvRows(t, r)
	if got := r.header.Get("Content-Disposition"); got != `attachment; filename="batch-`+id+`.csv"` {
		t.Fatalf("Content-Disposition %q", got)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows: %q", len(rows), rows)
	}
	col := func(name string) int { return slices.Index(record.ExportColumns, name) }
	for i, row := range rows {
		want := map[string]string{"batch_id": id, "kind": "campaign", "campaign": "camp", "automation": "", "template": "hello",
			"messaging_account": "main", "phone": "'" + phones[i], "error_code": "", "billable": "true", "pricing_model": "PMP",
			"replied": fmt.Sprint(i == 1)}
		for k, v := range want {
			if row[col(k)] != v {
				t.Errorf("row %d: %s = %q, want %q", i, k, row[col(k)], v)
			}
		}
		if st := row[col("state")]; st != "delivered" && st != "read" {
			t.Errorf("row %d: state %q", i, st)
		}
		for _, k := range []string{"created_at", "sent_at", "delivered_at", "pricing_category"} {
			if row[col(k)] == "" {
				t.Errorf("row %d: no %s", i, k)
			}
		}
		if _, err := time.Parse(time.RFC3339, row[col("sent_at")]); err != nil {
			t.Errorf("row %d: sent_at %q: %v", i, row[col("sent_at")], err)
		}
		if (row[col("replied_at")] != "") != (i == 1) {
			t.Errorf("row %d: replied_at %q", i, row[col("replied_at")])
		}
	}

	now := time.Now().UTC()
	rng := url.Values{"from": {now.Add(-time.Hour).Format(time.RFC3339)}, "to": {now.Add(time.Hour).Format(time.RFC3339)}}
	r = s.do(http.MethodGet, fmt.Sprintf("/api/campaigns/%d/export?%s", co.campaign.ID, rng.Encode()), co.key, nil)
	if got := csvRows(t, r); len(got) != 3 || !slices.Equal(got[0], rows[0]) {
		t.Fatalf("campaign export: %q", got)
	}
	if got, want := r.header.Get("Content-Disposition"), fmt.Sprintf(`attachment; filename="campaign-%d-camp_%s_%s.csv"`,
		co.campaign.ID, now.Add(-time.Hour).Format(time.DateOnly), now.Add(time.Hour).Format(time.DateOnly)); got != want {
		t.Fatalf("Content-Disposition %q, want %q", got, want)
	}
	if got := csvRows(t, s.do(http.MethodGet, "/api/exports/messages", co.key, nil)); len(got) != 3 {
		t.Fatalf("all messages (the last 30 days): %q", got)
	}
	if got := csvRows(t, s.do(http.MethodGet, fmt.Sprintf("/api/automations/%d/export", co.automation.ID), co.key, nil)); len(got) != 0 {
		t.Fatalf("the automation sent nothing: %q", got)
	}

	// A second export within 10 seconds is 429, with the limit's headers.
	r = s.do(http.MethodGet, "/api/batches/"+id+"/export", co.key, nil)
	wantBody(t, r, http.StatusTooManyRequests, `{"error":"Rate limit exceeded: 1 per 10 second"}`)
	if r.header.Get("Retry-After") == "" || r.header.Get("X-RateLimit-Limit") != "1" || r.header.Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("429 headers %v", r.header)
	}

	// Another company sees none of it; bad ranges are 422 before anything.
	rival := s.serve("export-rival")
	wantDetail(t, s.do(http.MethodGet, "/api/batches/"+id+"/export", rival.key, nil), 404, "Batch not found")
	wantDetail(t, s.do(http.MethodGet, fmt.Sprintf("/api/campaigns/%d/export", co.campaign.ID), rival.key, nil), 404, "Campaign not found")
	wantDetail(t, s.do(http.MethodGet, fmt.Sprintf("/api/automations/%d/export", co.automation.ID), rival.key, nil), 404, "Automation not found")
	if got := csvRows(t, s.do(http.MethodGet, "/api/exports/messages", rival.key, nil)); len(got) != 0 {
		t.Fatalf("the rival's messages: %q", got)
	}
	s.resetLimit("messages_export", rival.company.ID)
	wantBody(t, s.do(http.MethodGet, "/api/exports/messages?from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z", rival.key, nil), 422,
		`{"detail":[{"type":"value_error","loc":["query","from"],"msg":"Value error, from must be before to","input":"2026-02-01T00:00:00Z"}]}`)
	s.resetLimit("messages_export", rival.company.ID)
	wantBody(t, s.do(http.MethodGet, "/api/exports/messages?from=2025-01-01T00:00:00Z&to=2026-01-03T00:00:00Z", rival.key, nil), 422,
		`{"detail":[{"type":"value_error","loc":["query","from"],"msg":"Value error, the range is longer than 366 days: narrow it","input":"2025-01-01T00:00:00Z"}]}`)
	s.resetLimit("messages_export", rival.company.ID)
	r = s.do(http.MethodGet, "/api/exports/messages?to=last+week", rival.key, nil)
	if r.status != 422 || !strings.Contains(string(r.body), `"loc":["query","to"]`) {
		t.Fatalf("a bad to: %d %s", r.status, r.body)
	}
}

// TestExportCutWhenTheDatabaseFails: a database failure after the file has
// started (here, the export's connection terminated while the client is
// still reading) reaches the client as a failed download, not as a short
// file that ends cleanly.
func TestExportCutWhenTheDatabaseFails(t *testing.T) {
	g := newGateway(t, gwOptions{})
	co := g.provision("export-cut")
	ctx := context.Background()
	id := uuid.Must(uuid.NewV7()).String()
	const n = 30_000 // 6 queries of 5,000 rows, and more than the sockets buffer
	if _, err := g.pool.Exec(ctx, `INSERT INTO batches (id, company_id, kind, source, campaign_id, contact_count, status, accepted_at)
		VALUES ($1, $2, 'campaign', 'api:campaigns_send', $3, $4, 'completed', now())`, id, co.company.ID, co.campaign.ID, n); err != nil {
		t.Fatal(err)
	}
	if _, err := g.pool.Exec(ctx, `INSERT INTO messages (batch_id, seq, company_id, phone, state, created_at, updated_at)
		SELECT $1, s, $2, '+3933' || lpad(s::text, 8, '0'), 'delivered', now(), now() FROM generate_series(0, $3 - 1) s`,
		id, co.company.ID, n); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, g.url+"/api/batches/"+id+"/export", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("service-api-key", co.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); resp.StatusCode != 200 || err != nil || !strings.HasPrefix(line, "message_id,") {
		t.Fatalf("%d %q %v", resp.StatusCode, line, err)
	}
	// The export waits on the client, its transaction open: end it.
	var killed int
	if err := g.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%FROM messages m%'`).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminated %d backends, %v", killed, err)
	}
	rest, err := io.ReadAll(br)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("after %d more bytes: %v, want an unexpected EOF", len(rest), err)
	}
	if rows := strings.Count(string(rest), "\r\n"); rows >= n {
		t.Fatalf("%d rows arrived: the failure came too late to test", rows)
	}
}
