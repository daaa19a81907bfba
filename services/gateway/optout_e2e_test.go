package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
	"github.com/parleyhq/parley/pkg/contacts"
	"github.com/parleyhq/parley/testkit/storetest"
)

// reply makes a user of the simulator answer a company's number.
func (s *stack) reply(tn tenant, r whatsappsim.Reply) whatsappsim.ReplyResult {
	s.t.Helper()
	r.PhoneNumberID = tn.account.PhoneNumberID
	res, err := s.sim.Reply(context.Background(), r)
	if err != nil {
		s.t.Fatal(err)
	}
	if res.ReceiverStatus != 200 {
		s.t.Fatalf("reply %+v: the gateway answered %d %s", r, res.ReceiverStatus, res.ReceiverBody)
	}
	return res
}

// contact reads a company's contact (ok false when it has none).
func (s *stack) contact(companyID int64, phone string) (contacts.Contact, bool) {
	s.t.Helper()
	c, err := contacts.NewStore(s.pool, nil).ByPhone(context.Background(), companyID, phone)
	if err != nil {
		if strings.Contains(err.Error(), "not found") {
			return contacts.Contact{}, false
		}
		s.t.Fatal(err)
	}
	return c, true
}

func (s *stack) history(companyID int64, phone string) []contacts.ConsentEvent {
	s.t.Helper()
	c, ok := s.contact(companyID, phone)
	if !ok {
		s.t.Fatalf("no contact %s", phone)
	}
	h, err := contacts.NewStore(s.pool, nil).OptOutHistory(context.Background(), companyID, c.ID)
	if err != nil {
		s.t.Fatal(err)
	}
	return h
}

func (s *stack) outbox(companyID int64, typ string) int {
	s.t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM event_outbox WHERE company_id = $1 AND type = $2`,
		companyID, typ).Scan(&n); err != nil {
		s.t.Fatal(err)
	}
	return n
}

// sendAndWait sends a campaign (or, with automation, triggers the
// automation) to one number and returns the completed batch's counts.
func (s *stack) sendAndWait(tn tenant, automation bool, phone string) map[string]int {
	s.t.Helper()
	var r response
	if automation {
		r = s.post("/api/automations/send", tn.key, fmt.Sprintf(`{"automation_id":%d,"contacts":[{"phone":%q,"variables":{"order_id":"A-1"}}]}`,
			tn.automation.ID, phone))
	} else {
		r = s.post("/api/campaigns/send", tn.key, campaignBody(tn.campaign.ID, phone))
	}
	if r.status != 202 {
		s.t.Fatalf("%d %s", r.status, r.body)
	}
	return counts(s.waitBatch(tn.key, r.json(s.t)["batch_id"].(string), 15*time.Second, completed))
}

func sentOrLater(c map[string]int) int { return c["sent"] + c["delivered"] + c["read"] }

// TestEndToEndStopThenCampaignThenAutomation: a user replies STOP; the
// next campaign skips them and the provider never gets it; an automation
// still reaches them; START opts them back in.
func TestEndToEndStopThenCampaignThenAutomation(t *testing.T) {
	s := newStack(t)
	co := s.serve("acme")
	storetest.Subscribe(t, s.pool, co.company.ID) // its changes write their events
	const ada = "+393330000101"
	if _, ok := s.contact(co.company.ID, ada); ok {
		t.Fatal("the contact exists before any message")
	}

	stop := s.reply(co, whatsappsim.Reply{From: ada, Text: "  sToP \n", Name: "Ada"})
	c, ok := s.contact(co.company.ID, ada)
	if !ok || !c.OptedOut() {
		t.Fatalf("after STOP from an unknown number: contact %+v (exists %v), want created and opted out", c, ok)
	}
	h := s.history(co.company.ID, ada)
	if len(h) != 1 || !h[0].OptedOut || h[0].Reason != "keyword" || h[0].Keyword != "STOP" || h[0].ProviderMessageID != stop.ID {
		t.Fatalf("history %+v", h)
	}
	if n := s.outbox(co.company.ID, "contact.opted_out"); n != 1 {
		t.Fatalf("%d contact.opted_out events, want 1", n)
	}

	if c := s.sendAndWait(co, false, ada); c["skipped_opt_out"] != 1 || sentOrLater(c) != 0 {
		t.Fatalf("campaign after STOP: %v", c)
	}
	if n := len(s.received(ada)); n != 0 {
		t.Fatalf("the provider got %d messages for an opted-out contact", n)
	}
	if c := s.sendAndWait(co, true, ada); sentOrLater(c) != 1 {
		t.Fatalf("automation after STOP: %v", c)
	}
	if n := len(s.received(ada)); n != 1 {
		t.Fatalf("the automation reached the provider %d times, want 1", n)
	}
	// Forced campaigns reach them too.
	r := s.post("/api/campaigns/send", co.key, fmt.Sprintf(`{"campaign_id":%d,"contacts":[%q],"is_forced":true}`, co.campaign.ID, ada))
	if c := counts(s.waitBatch(co.key, r.json(t)["batch_id"].(string), 15*time.Second, completed)); sentOrLater(c) != 1 {
		t.Fatalf("forced campaign after STOP: %v", c)
	}

	// A second STOP is history, not a change; START opts back in.
	s.reply(co, whatsappsim.Reply{From: ada, Text: "STOP"})
	s.reply(co, whatsappsim.Reply{From: ada, Text: "Unstop"})
	if c, _ := s.contact(co.company.ID, ada); c.OptedOut() {
		t.Fatal("UNSTOP did not opt the contact back in")
	}
	if h := s.history(co.company.ID, ada); len(h) != 3 || h[2].OptedOut || h[2].Keyword != "UNSTOP" {
		t.Fatalf("history %+v", h)
	}
	if n, m := s.outbox(co.company.ID, "contact.opted_out"), s.outbox(co.company.ID, "contact.opted_in"); n != 1 || m != 1 {
		t.Fatalf("events: %d opted_out, %d opted_in; want 1 and 1", n, m)
	}
	if c := s.sendAndWait(co, false, ada); sentOrLater(c) != 1 {
		t.Fatalf("campaign after UNSTOP: %v", c)
	}

	// Any other text creates the contact and changes nothing.
	const bo = "+393330000102"
	s.reply(co, whatsappsim.Reply{From: bo, Text: "stop it please"})
	if c, ok := s.contact(co.company.ID, bo); !ok || c.OptedOut() {
		t.Fatalf("an ordinary text: contact %+v (exists %v), want created and not opted out", c, ok)
	}

	// Another company's number is another company's contact.
	rival := s.serve("rival")
	if _, ok := s.contact(rival.company.ID, ada); ok {
		t.Fatal("the reply to acme created a contact of rival")
	}
}

// TestEndToEndCompanyKeywordsAndButton: a company's own words replace the
// defaults, and its marketing opt-out button payload opts out.
func TestEndToEndCompanyKeywordsAndButton(t *testing.T) {
	s := newStack(t)
	co := s.serve("acme")
	store := contacts.NewStore(s.pool, nil)
	if _, err := store.SetOptOutSettings(context.Background(), co.company.ID, contacts.OptOutSettings{
		OptOutKeywords: []string{"basta"}, OptInKeywords: []string{"Ancora"}, OptOutPayloads: []string{"STOP_PROMOTIONS"},
	}); err != nil {
		t.Fatal(err)
	}
	const a, b = "+393330000111", "+393330000112"
	s.reply(co, whatsappsim.Reply{From: a, Text: "STOP"})
	if c, _ := s.contact(co.company.ID, a); c.OptedOut() {
		t.Fatal("STOP opted out although the company's words replace the defaults")
	}
	s.reply(co, whatsappsim.Reply{From: a, Text: " Basta"})
	if c, _ := s.contact(co.company.ID, a); !c.OptedOut() {
		t.Fatal("the company's keyword did not opt out")
	}
	s.reply(co, whatsappsim.Reply{From: a, Text: "ANCORA"})
	if c, _ := s.contact(co.company.ID, a); c.OptedOut() {
		t.Fatal("the company's opt-in keyword did not opt in")
	}
	s.reply(co, whatsappsim.Reply{From: b, ButtonPayload: "STOP_PROMOTIONS", ButtonText: "Stop promotions"})
	if h := s.history(co.company.ID, b); len(h) != 1 || !h[0].OptedOut || h[0].Reason != "button" || h[0].Keyword != "STOP_PROMOTIONS" {
		t.Fatalf("button history %+v", h)
	}
	if c := s.sendAndWait(co, false, b); c["skipped_opt_out"] != 1 {
		t.Fatalf("campaign after the opt-out button: %v", c)
	}
	// Another payload does nothing.
	s.reply(co, whatsappsim.Reply{From: a, ButtonPayload: "MORE_INFO"})
	if c, _ := s.contact(co.company.ID, a); c.OptedOut() {
		t.Fatal("an unrelated button payload opted out")
	}
}

// TestEndToEndStoppedMarketing131050: the provider refuses a send with
// 131050; the message fails with that code and the contact is opted out,
// so the next campaign skips it. A failed status callback with 131050 does
// the same.
func TestEndToEndStoppedMarketing131050(t *testing.T) {
	s := newStack(t)
	co := s.serve("acme")
	const refused, fine = "+393330000201", "+393330000202"
	f := s.sim.Faults()
	f.StoppedMarketing = []string{refused}
	if err := s.sim.SetFaults(f); err != nil {
		t.Fatal(err)
	}
	r := s.post("/api/campaigns/send", co.key, campaignBody(co.campaign.ID, refused, fine))
	id := r.json(t)["batch_id"].(string)
	if c := counts(s.waitBatch(co.key, id, 15*time.Second, completed)); c["failed"] != 1 || sentOrLater(c) != 1 {
		t.Fatalf("counts %v", c)
	}
	var code int
	var title string
	if err := s.pool.QueryRow(context.Background(), `SELECT error_code, error_title FROM messages WHERE batch_id = $1 AND phone = $2`,
		id, refused).Scan(&code, &title); err != nil || code != 131050 {
		t.Fatalf("refused message: code %d title %q (%v)", code, title, err)
	}
	c, ok := s.contact(co.company.ID, refused)
	if !ok || !c.OptedOut() {
		t.Fatalf("131050: contact %+v (exists %v), want opted out", c, ok)
	}
	h := s.history(co.company.ID, refused)
	if len(h) != 1 || h[0].Reason != "provider" || h[0].MessageID == nil {
		t.Fatalf("history %+v", h)
	}
	if c, _ := s.contact(co.company.ID, fine); c.OptedOut() {
		t.Fatal("the delivered contact was opted out")
	}
	// The next campaign skips it: the provider is not asked again.
	if err := s.sim.SetFaults(whatsappsim.Faults{}); err != nil {
		t.Fatal(err)
	}
	if c := s.sendAndWait(co, false, refused); c["skipped_opt_out"] != 1 {
		t.Fatalf("campaign after 131050: %v", c)
	}
	if n := len(s.received(refused)); n != 0 {
		t.Fatalf("the provider got %d messages for the refused number", n)
	}

	// 131050 in a failed status callback.
	const late = "+393330000203"
	set := s.sim.CallbackSettings()
	off := set
	off.URL = ""
	if err := s.sim.SetCallbacks(off); err != nil {
		t.Fatal(err)
	}
	r = s.post("/api/campaigns/send", co.key, campaignBody(co.campaign.ID, late))
	id = r.json(t)["batch_id"].(string)
	s.waitBatch(co.key, id, 15*time.Second, completed)
	got := s.received(late)
	if len(got) != 1 {
		t.Fatalf("sends to %s: %d", late, len(got))
	}
	s.webhook(t, statusPayload(co.account.PhoneNumberID, got[0].ID, late, `"failed"`,
		`,"errors":[{"code":131050,"title":"User has stopped marketing messages"}]`), 200)
	if c, _ := s.contact(co.company.ID, late); !c.OptedOut() {
		t.Fatal("a failed status with 131050 did not opt the contact out")
	}
	if h := s.history(co.company.ID, late); len(h) != 1 || h[0].ProviderMessageID != got[0].ID {
		t.Fatalf("history %+v", h)
	}
}

// webhook posts a signed body to the gateway's webhook.
func (s *stack) webhook(t *testing.T, body string, want int) response {
	t.Helper()
	r := s.post("/webhooks/whatsapp", "", body, whatsapp.SignatureHeader, whatsapp.Sign(testAppSecret, []byte(body)))
	if r.status != want {
		t.Fatalf("webhook: %d %s, want %d", r.status, r.body, want)
	}
	return r
}

func statusPayload(pnid, wamid, to, status, extra string) string {
	return `{"object":"whatsapp_business_account","entry":[{"id":"` + pnid + `","changes":[{"field":"messages","value":{` +
		`"messaging_product":"whatsapp","metadata":{"display_phone_number":"` + pnid + `","phone_number_id":"` + pnid + `"},` +
		`"statuses":[{"id":"` + wamid + `","status":` + status + `,"timestamp":"` + strconv.FormatInt(time.Now().Unix(), 10) +
		`","recipient_id":"` + strings.TrimPrefix(to, "+") + `"` + extra + `}]}}]}]}`
}

// TestWebhookInboundBadInput: what cannot be read is ignored without
// holding back the rest of the delivery, and changes nothing.
func TestWebhookInboundBadInput(t *testing.T) {
	s := newStack(t)
	co := s.serve("acme")
	contactCount := func() int {
		var n int
		if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM contacts`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// A message 'sent' with callbacks off, whose status we deliver below.
	set := s.sim.CallbackSettings()
	set.URL = ""
	if err := s.sim.SetCallbacks(set); err != nil {
		t.Fatal(err)
	}
	const to = "+393330000301"
	r := s.post("/api/campaigns/send", co.key, campaignBody(co.campaign.ID, to))
	id := r.json(t)["batch_id"].(string)
	s.waitBatch(co.key, id, 15*time.Second, completed)
	wamid := s.received(to)[0].ID
	before := contactCount()

	pnid := co.account.PhoneNumberID
	value := func(messages string) string {
		return `{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages","value":{` +
			`"messaging_product":"whatsapp","metadata":{"display_phone_number":"x","phone_number_id":"` + pnid + `"},` +
			`"statuses":[{"id":"` + wamid + `","status":"delivered","timestamp":"1700000000","recipient_id":"393330000301"}],` +
			`"messages":` + messages + `}}]}]}`
	}
	// A bad signature: 401, nothing read.
	body := value(`[{"from":"393330000399","id":"wamid.in1","timestamp":"1700000000","type":"text","text":{"body":"STOP"}}]`)
	r = s.post("/webhooks/whatsapp", "", body, whatsapp.SignatureHeader, whatsapp.Sign("not-the-secret", []byte(body)))
	wantDetail(t, r, 401, "Invalid signature")
	if n := contactCount(); n != before {
		t.Fatalf("a badly signed webhook created %d contacts", n-before)
	}
	// Malformed messages beside a good status: the status is applied, the
	// messages ignored and counted.
	for _, messages := range []string{
		`{"from":"393330000399"}`, // not an array
		`"STOP"`,
		`[{"from":"393330000399","timestamp":"1700000000","type":"text","text":{"body":"STOP"}}]`, // no id
		`[{"from":"not a number","id":"wamid.in2","type":"text","text":{"body":"STOP"}}]`,
		`[{"from":"393330000399","id":"wamid.in3","type":"text","text":"STOP"}]`, // text is not an object
		`[42]`,
	} {
		r := s.webhook(t, value(messages), 200)
		if !strings.Contains(string(r.body), `"ignored":1`) {
			t.Fatalf("messages %s: answer %s, want one ignored", messages, r.body)
		}
	}
	if n := contactCount(); n != before {
		t.Fatalf("malformed messages created %d contacts", n-before)
	}
	b := s.waitBatch(co.key, id, 5*time.Second, func(b map[string]any) bool { return counts(b)["delivered"] == 1 })
	if counts(b)["delivered"] != 1 {
		t.Fatalf("the status beside malformed messages was not applied: %v", b)
	}
	// A good message beside a malformed one is recorded.
	s.webhook(t, value(`[{"id":"wamid.bad"},{"from":"393330000399","id":"wamid.in4","timestamp":"1700000000","type":"text","text":{"body":"stop"}}]`), 200)
	if c, ok := s.contact(co.company.ID, "+393330000399"); !ok || !c.OptedOut() {
		t.Fatalf("the good message beside a malformed one: %+v %v", c, ok)
	}
	// Delivered again: recorded once.
	s.webhook(t, value(`[{"from":"393330000399","id":"wamid.in4","timestamp":"1700000000","type":"text","text":{"body":"stop"}}]`), 200)
	if h := s.history(co.company.ID, "+393330000399"); len(h) != 1 {
		t.Fatalf("a redelivered webhook was recorded %d times", len(h))
	}
	// A number no company has: acknowledged, ignored.
	before = contactCount()
	other := strings.Replace(value(`[{"from":"393330000398","id":"wamid.in5","timestamp":"1700000000","type":"text","text":{"body":"STOP"}}]`),
		`"phone_number_id":"`+pnid+`"`, `"phone_number_id":"99999999"`, 1)
	if r := s.webhook(t, other, 200); !strings.Contains(string(r.body), `"ignored":1`) {
		t.Fatalf("unknown number: %s", r.body)
	}
	if n := contactCount(); n != before {
		t.Fatal("a message to an unknown number created a contact")
	}
	// A non-text message (an image) from an unknown number creates the contact.
	s.webhook(t, value(`[{"from":"393330000397","id":"wamid.in6","timestamp":"1700000000","type":"image","image":{"id":"1"}}]`), 200)
	if c, ok := s.contact(co.company.ID, "+393330000397"); !ok || c.OptedOut() {
		t.Fatalf("image from an unknown number: %+v %v", c, ok)
	}
}

// TestSimReplyBadInput: the simulator's reply endpoint refuses what it
// cannot send, and posts nothing.
func TestSimReplyBadInput(t *testing.T) {
	s := newStack(t)
	co := s.serve("acme")
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"phone_number_id":"` + co.account.PhoneNumberID + `","from":"+393330000401"}`, 400},
		{`{"phone_number_id":"` + co.account.PhoneNumberID + `","from":"+393330000401","text":"a","button_payload":"b"}`, 400},
		{`{"phone_number_id":"` + co.account.PhoneNumberID + `","from":"12","text":"STOP"}`, 400},
		{`{"phone_number_id":"` + co.account.PhoneNumberID + `","from":"+393330000401","text":"STOP","extra":1}`, 400},
		{`{"phone_number_id":"12345","from":"+393330000401","text":"STOP"}`, 404},
	} {
		rec := httpRecorder(s.sim, http.MethodPost, "/_sim/replies", tc.body)
		if rec.status != tc.want {
			t.Fatalf("%s: %d %s, want %d", tc.body, rec.status, rec.body, tc.want)
		}
		var d map[string]any
		if json.Unmarshal(rec.body, &d) != nil || d["detail"] == nil {
			t.Fatalf("%s: body %s is not a detail", tc.body, rec.body)
		}
	}
	if _, ok := s.contact(co.company.ID, "+393330000401"); ok {
		t.Fatal("a refused reply reached the gateway")
	}
	if rec := httpRecorder(s.sim, http.MethodPatch, "/_sim/faults", `{"stopped_marketing":["39333x"]}`); rec.status != 400 {
		t.Fatalf("bad stopped_marketing: %d %s", rec.status, rec.body)
	}
	if rec := httpRecorder(s.sim, http.MethodPatch, "/_sim/faults", `{"stopped_marketing":["+39333*"]}`); rec.status != 200 ||
		!strings.Contains(string(rec.body), `"stopped_marketing":["+39333*"]`) {
		t.Fatalf("stopped_marketing prefix: %d %s", rec.status, rec.body)
	}
	set := s.sim.CallbackSettings()
	set.URL = ""
	if err := s.sim.SetCallbacks(set); err != nil {
		t.Fatal(err)
	}
	if rec := httpRecorder(s.sim, http.MethodPost, "/_sim/replies",
		`{"phone_number_id":"`+co.account.PhoneNumberID+`","from":"+393330000401","text":"STOP"}`); rec.status != 409 {
		t.Fatalf("callbacks off: %d %s", rec.status, rec.body)
	}
}

// httpRecorder serves one request with h, in process.
func httpRecorder(h http.Handler, method, path, body string) response {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}
