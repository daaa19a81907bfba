package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/catalog"
)

// The duplicate rule of every send (phone.FirstOfEach): a number named more
// than once, with or without its '+', is sent one message, its first
// entry's; the 202's contacts, the batch's contacts (from the stream and
// once recorded) and what the provider received all agree. Each test goes
// through the real gateway and dispatchers.

const (
	dupA = "+393880000001" // named twice: "+39388..." and "39388..."
	dupB = "+393880000002"
)

// sendsOncePerNumber posts a send that names dupA twice and dupB once and
// checks that it is counted, recorded and delivered as two numbers, each
// receiving one message. It returns the completed batch.
func (s *stack) sendsOncePerNumber(co tenant, path, body, kind, source string) map[string]any {
	s.t.Helper()
	r := s.post(path, co.key, body)
	if r.status != 202 || r.json(s.t)["contacts"] != float64(2) {
		s.t.Fatalf("%s: %d %s (want contacts 2)", path, r.status, r.body)
	}
	id := r.json(s.t)["batch_id"].(string)
	// Whichever view answers first (the stream's or the record) says 2.
	if g := s.do(http.MethodGet, "/api/batches/"+id, co.key, nil); g.status != 200 || g.json(s.t)["contacts"] != float64(2) {
		s.t.Fatalf("%s: batch %d %s (want contacts 2)", path, g.status, g.body)
	}
	b := s.waitBatch(co.key, id, 15*time.Second, completed)
	c := counts(b)
	if b["contacts"] != float64(2) || c["sent"]+c["delivered"]+c["read"] != 2 || b["kind"] != kind || b["source"] != source {
		s.t.Fatalf("%s: recorded batch %v", path, b)
	}
	for _, p := range []string{dupA, dupB} {
		if n := len(s.received(p)); n != 1 {
			s.t.Fatalf("%s: %s received %d messages, want 1", path, p, n)
		}
	}
	return b
}

func TestOneMessagePerNumberCampaign(t *testing.T) {
	s := newStack(t)
	co := s.serve("acme")
	s.sendsOncePerNumber(co, "/api/campaigns/send", campaignBody(co.campaign.ID, dupA, dupA[1:], dupB), "campaign", "api:campaigns_send")
}

// The bug report: an automation trigger with "+39388...", "39388..." and a
// third number answered contacts 3 while the batch said 2. The first entry
// of a number wins whole: its names and variables are sent and saved, the
// repeat's are dropped.
func TestOneMessagePerNumberAutomation(t *testing.T) {
	s := newStack(t)
	co := s.serve("acme")
	body := fmt.Sprintf(`{"automation_id":%d,"contacts":[
		{"phone":%q,"first_name":"First","variables":{"order_id":"F-1"}},
		{"phone":%q,"first_name":"Second","last_name":"Later","variables":{"order_id":"S-2","extra":"x"}},
		{"phone":%q,"first_name":"Other","variables":{"order_id":"O-3"}}]}`, co.automation.ID, dupA, dupA[1:], dupB)
	s.sendsOncePerNumber(co, "/api/automations/send", body, "automation", "api:automations_send")
	if got := s.bodyText(dupA); got != "First|F-1" {
		t.Fatalf("%s got %q, want the first entry's", dupA, got)
	}
	var first, last string
	var vars map[string]string
	if err := s.pool.QueryRow(context.Background(), `SELECT first_name, COALESCE(last_name, ''), variables FROM contacts
		WHERE company_id = $1 AND phone = $2`, co.company.ID, dupA).Scan(&first, &last, &vars); err != nil {
		t.Fatal(err)
	}
	if first != "First" || last != "" || len(vars) != 1 || vars["order_id"] != "F-1" {
		t.Fatalf("saved contact %q %q %v, want the first entry's", first, last, vars)
	}
}

func TestOneMessagePerNumberBatchSend(t *testing.T) {
	s := newStack(t)
	co := s.serve("acme")
	body := fmt.Sprintf(`{"messages":[
		{"phone":%q,"campaign_id":%d,"first_name":"First","variables":{"order_id":"F-1"}},
		{"phone":%q,"template_id":%d,"messaging_account_id":%d,"first_name":"Second","variables":{"order_id":"S-2"}},
		{"phone":%q,"campaign_id":%d,"first_name":"Other","variables":{"order_id":"O-3"}}]}`,
		dupA, co.campaign.ID, dupA[1:], co.template.ID, co.account.ID, dupB, co.campaign.ID)
	s.sendsOncePerNumber(co, "/api/batch/send", body, "batch", "api:batch_send")
	if got := s.bodyText(dupA); got != "First|F-1" {
		t.Fatalf("%s got %q, want the first entry's", dupA, got)
	}
}

// A connector send, to each kind of target (two companies: one connector
// send per 10 s each).
func TestOneMessagePerNumberConnector(t *testing.T) {
	s := newStack(t)
	body := fmt.Sprintf(`{"contacts":[
		{"phone":%q,"first_name":"First","variables":{"order_id":"F-1"}},
		{"phone":%q,"first_name":"Second","variables":{"order_id":"S-2"}},
		{"phone":%q,"first_name":"Other","variables":{"order_id":"O-3"}}]}`, dupA, dupA[1:], dupB)
	for i, target := range []string{"automation", "campaign"} {
		co := s.serve(fmt.Sprintf("co-%d", i))
		nc := catalog.NewConnector{CompanyID: co.company.ID, Name: "shopify", Connected: true}
		if target == "automation" {
			nc.TargetAutomationID = &co.automation.ID
		} else {
			nc.TargetCampaignID = &co.campaign.ID
		}
		if _, err := s.cat.CreateConnector(context.Background(), nc); err != nil {
			t.Fatal(err)
		}
		s.sim.Reset()
		s.sendsOncePerNumber(co, "/api/shopify/send", body, "connector", "connector:shopify")
		if got := s.bodyText(dupA); got != "First|F-1" {
			t.Fatalf("%s target: %s got %q, want the first entry's", target, dupA, got)
		}
	}
}
