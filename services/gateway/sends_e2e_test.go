package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
)

// bodyText is the body parameters of the one message a number received.
func (s *stack) bodyText(phone string) string {
	s.t.Helper()
	rcv := s.received(phone)
	if len(rcv) != 1 {
		s.t.Fatalf("%s received %d messages, want 1", phone, len(rcv))
	}
	return bodyOf(rcv[0])
}

func bodyOf(r whatsappsim.Received) string {
	var out []string
	for _, c := range r.Components {
		if c.Type == "body" {
			for _, p := range c.Parameters {
				out = append(out, p.Text)
			}
		}
	}
	return strings.Join(out, "|")
}

// TestEndToEndSegmentBatchAndConnector: a segment built through the API, a
// campaign sent to it, a batch send and a connector send to a campaign, all
// delivered through the dispatchers to the provider simulator.
func TestEndToEndSegmentBatchAndConnector(t *testing.T) {
	s := newStack(t)
	co := s.serve("acme")

	id := createSegment(t, s.gw, co.key, "VIP",
		`{"phone":"+393330000101","first_name":"Ana","variables":{"order_id":"A-1"}}`,
		`{"phone":"+393330000102","first_name":"Bo","variables":{"order_id":"B-2"}}`,
		`{"phone":"+393330000103","first_name":"Cy","variables":{"order_id":"C-3"}}`)
	r := s.post(fmt.Sprintf("/api/segments/%d/contacts", id), co.key, `{"contacts":[{"phone":"+393330000104","first_name":"Di","variables":{"order_id":"D-4"}}]}`)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	s.optOut(co.company.ID, "+393330000103")

	r = s.post("/api/campaigns/send", co.key, fmt.Sprintf(`{"campaign_id":%d,"segment_id":%d}`, co.campaign.ID, id))
	if r.status != 202 || r.json(t)["contacts"] != float64(4) {
		t.Fatalf("%d %s", r.status, r.body)
	}
	b := s.waitBatch(co.key, r.json(t)["batch_id"].(string), 10*time.Second, completed)
	if c := counts(b); c["skipped_opt_out"] != 1 || c["sent"]+c["delivered"]+c["read"] != 3 {
		t.Fatalf("segment campaign counts %v", c)
	}
	for phone, want := range map[string]string{"+393330000101": "Ana|A-1", "+393330000102": "Bo|B-2", "+393330000104": "Di|D-4"} {
		if got := s.bodyText(phone); got != want {
			t.Fatalf("%s got %q, want %q (personalised from the saved contact)", phone, got, want)
		}
	}

	// A batch send: per-message personalisation over the saved contact, one
	// message through a template and account named directly, campaign rules.
	r = s.post("/api/batch/send", co.key, fmt.Sprintf(`{"messages":[
		{"phone":"+393330000101","campaign_id":%d,"variables":{"order_id":"A-9"}},
		{"phone":"+393330000201","template_id":%d,"messaging_account_id":%d,"first_name":"Eve","variables":{"order_id":"E-5"}},
		{"phone":"+393330000103","campaign_id":%d,"first_name":"Opted","variables":{"order_id":"X"}}]}`,
		co.campaign.ID, co.template.ID, co.account.ID, co.campaign.ID))
	if r.status != 202 || r.json(t)["contacts"] != float64(3) {
		t.Fatalf("%d %s", r.status, r.body)
	}
	b = s.waitBatch(co.key, r.json(t)["batch_id"].(string), 10*time.Second, completed)
	if c := counts(b); c["skipped_opt_out"] != 1 || c["sent"]+c["delivered"]+c["read"] != 2 || b["kind"] != "batch" {
		t.Fatalf("batch send %v", b)
	}
	if got := bodyOf(s.received("+393330000101")[1]); got != "Ana|A-9" {
		t.Fatalf("batch message over a saved contact: %q", got)
	}
	if got := s.bodyText("+393330000201"); got != "Eve|E-5" {
		t.Fatalf("batch message to an unknown contact: %q", got)
	}

	// A connector whose target is the campaign.
	if _, err := s.cat.CreateConnector(context.Background(), catalog.NewConnector{CompanyID: co.company.ID, Name: "shopify",
		Connected: true, TargetCampaignID: &co.campaign.ID}); err != nil {
		t.Fatal(err)
	}
	r = s.post("/api/shopify/send", co.key, `{"contacts":[{"phone":"+393330000301","first_name":"Flo","variables":{"order_id":"F-6"}}]}`)
	if r.status != 202 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	s.waitBatch(co.key, r.json(t)["batch_id"].(string), 10*time.Second, completed)
	if got := s.bodyText("+393330000301"); got != "Flo|F-6" {
		t.Fatalf("connector send: %q", got)
	}
}
