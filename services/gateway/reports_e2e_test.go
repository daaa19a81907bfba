package main

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
)

// TestEndToEndCampaignReport sends a campaign through the whole stack (one
// contact opted out, one number not on WhatsApp, the others read at once:
// no delivered callback), has two contacts answer,
// and holds the campaign's report to what provider-sim received and
// called back, counted there per recipient; then the report's refusals.
func TestEndToEndCampaignReport(t *testing.T) {
	s := newStack(t)
	tn := s.serve("report")
	good := []string{"+393331110001", "+393331110002", "+393331110003", "+393331110004"}
	optedOut, undeliverable := "+393331110005", "+393331110006"
	s.optOut(tn.company.ID, optedOut)
	if err := s.sim.SetFaults(whatsappsim.Faults{Undeliverable: []string{undeliverable}}); err != nil {
		t.Fatal(err)
	}
	// Every message read as it arrives: the provider sends read without
	// delivered (and the pricing with it), as the Cloud API does.
	cb := s.sim.CallbackSettings()
	cb.ReadAtOnce = 1
	if err := s.sim.SetCallbacks(cb); err != nil {
		t.Fatal(err)
	}
	start := time.Now().UTC()
	r := s.post("/api/campaigns/send", tn.key, campaignBody(tn.campaign.ID, append(good, optedOut, undeliverable)...))
	if r.status != 202 {
		t.Fatalf("send: %d %s", r.status, r.body)
	}
	batch := r.json(t)["batch_id"].(string)
	s.waitBatch(tn.key, batch, 15*time.Second, func(b map[string]any) bool {
		c := counts(b)
		return completed(b) && c["read"] == len(good) && c["failed"] == 1
	})

	// Counted at provider-sim: who received what.
	sent := 0
	for _, p := range append(good, optedOut, undeliverable) {
		sent += len(s.received(p))
	}
	if sent != len(good)+1 || len(s.received(optedOut)) != 0 {
		t.Fatalf("provider-sim received %d messages (%d for the opted-out contact), want %d and 0",
			sent, len(s.received(optedOut)), len(good)+1)
	}
	// Two contacts answer: one quoting the campaign's message, one not.
	quoted := s.received(good[0])[0].ID
	s.reply(tn, whatsappsim.Reply{From: good[0], Text: "Is it still on?", Context: quoted})
	s.reply(tn, whatsappsim.Reply{From: good[1], Text: "Thanks!"})
	s.reply(tn, whatsappsim.Reply{From: good[1], Text: "Really, thanks"}) // the same message: counted once

	q := url.Values{"interval": {"hour"}, "from": {start.Add(-time.Hour).Format(time.RFC3339)},
		"to": {start.Add(time.Hour).Format(time.RFC3339)}}
	path := fmt.Sprintf("/api/campaigns/%d/report?%s", tn.campaign.ID, q.Encode())
	var rep map[string]any
	deadline := time.Now().Add(10 * time.Second)
	for {
		r = s.do(http.MethodGet, path, tn.key, nil)
		if r.status == 429 {
			time.Sleep(time.Second)
			continue
		}
		if r.status != 200 {
			t.Fatalf("report: %d %s", r.status, r.body)
		}
		rep = r.json(t)
		if rep["replied"] == float64(2) || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	want := map[string]float64{"accepted": 6, "sent": float64(sent), "delivered": 4, "read": 4, "replied": 2, "failed": 1,
		"skipped_opt_out": 1, "cancelled": 0, "billable": 4, "waiting": 0}
	for k, v := range want {
		if rep[k] != v {
			t.Errorf("report %s = %v, want %v (%s)", k, rep[k], v, r.body)
		}
	}
	camp, _ := rep["campaign"].(map[string]any)
	tpl, _ := camp["template"].(map[string]any)
	if camp["name"] != tn.campaign.Name || tpl["name"] == "" || tpl["name"] == nil {
		t.Errorf("the report names %v, want campaign %q with its template", camp, tn.campaign.Name)
	}
	rates := rep["rates"].(map[string]any)
	if rates["delivered"] != 0.8 || rates["read"] != 1.0 || rates["replied"] != 0.5 {
		t.Errorf("rates %v", rates)
	}
	failures := rep["failures"].([]any)
	if len(failures) != 1 || failures[0].(map[string]any)["code"] != float64(131026) || failures[0].(map[string]any)["count"] != float64(1) {
		t.Errorf("failures %v", failures)
	}
	billing := rep["billable_by_category"].([]any)
	if len(billing) != 1 || billing[0].(map[string]any)["count"] != float64(4) || billing[0].(map[string]any)["category"] == "" {
		t.Errorf("billable by category %v", billing)
	}
	series := rep["series"].([]any)
	var seriesSent float64
	for _, p := range series {
		seriesSent += p.(map[string]any)["sent"].(float64)
	}
	if len(series) < 2 || seriesSent != float64(sent) {
		t.Errorf("series of %d hours sends %v, want %d", len(series), seriesSent, sent)
	}
	// The message knows its price and its reply.
	msgs := s.do(http.MethodGet, "/api/batches/"+batch+"/messages?state=read", tn.key, nil).json(t)["messages"].([]any)
	var priced, replied int
	for _, m := range msgs {
		m := m.(map[string]any)
		if p, ok := m["pricing"].(map[string]any); ok && p["billable"] == true && p["pricing_model"] == "PMP" {
			priced++
		}
		if _, ok := m["times"].(map[string]any)["replied"]; ok {
			replied++
		}
	}
	if priced != 4 || replied != 2 {
		t.Errorf("%d read messages priced and %d replied, want 4 and 2", priced, replied)
	}

	// Refusals: another company's campaign, a bad range, an unknown zone
	// (after a second, to start with the limit's full burst).
	time.Sleep(time.Second)
	rival := s.serve("report-rival")
	wantDetail(t, s.do(http.MethodGet, fmt.Sprintf("/api/campaigns/%d/report", tn.campaign.ID), rival.key, nil), 404, "Campaign not found")
	wantDetail(t, s.do(http.MethodGet, fmt.Sprintf("/api/automations/%d/report", tn.automation.ID), rival.key, nil), 404, "Automation not found")
	wantDetail(t, s.do(http.MethodGet, "/api/campaigns/x/report", tn.key, nil), 404, "Campaign not found")
	for _, c := range []struct{ query, loc string }{
		{"from=2026-11-02T00:00:00Z&to=2026-11-01T00:00:00Z", "from"},
		{"interval=hour&from=2026-01-01T00:00:00Z&to=2026-03-01T00:00:00Z", "interval"},
		{"interval=week", "interval"},
		{"tz=Mars/Olympus", "tz"},
		{"from=yesterday", "from"},
	} {
		time.Sleep(250 * time.Millisecond) // under the limit
		r := s.do(http.MethodGet, fmt.Sprintf("/api/campaigns/%d/report?%s", tn.campaign.ID, c.query), tn.key, nil)
		detail, _ := r.json(t)["detail"].([]any)
		if r.status != 422 || len(detail) != 1 || fmt.Sprint(detail[0].(map[string]any)["loc"]) != "[query "+c.loc+"]" {
			t.Errorf("%s: %d %s, want 422 at [query %s]", c.query, r.status, r.body, c.loc)
		}
	}
	// Its own limit: 5 a second, then 429 with the limit's headers.
	limited := false
	for i := 0; i < 20 && !limited; i++ {
		r := s.do(http.MethodGet, fmt.Sprintf("/api/automations/%d/report", tn.automation.ID), tn.key, nil)
		switch r.status {
		case 200:
		case 429:
			limited = r.header.Get("Retry-After") != "" && r.header.Get("X-RateLimit-Limit") == "5"
			if !limited {
				t.Fatalf("429 without its headers: %v", r.header)
			}
		default:
			t.Fatalf("automation report: %d %s", r.status, r.body)
		}
	}
	if !limited {
		t.Error("20 reports in a row were never limited")
	}
}
