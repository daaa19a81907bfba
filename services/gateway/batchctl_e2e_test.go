package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
)

// cancel posts a cancel and returns its answer.
func (g *gw) cancel(key, id string, headers ...string) response {
	g.t.Helper()
	return g.do(http.MethodPost, "/api/batches/"+id+"/cancel", key, nil, headers...)
}

// listMessages pages through GET /api/batches/{id}/messages with query q
// (without cursor) and returns every item.
func (g *gw) listMessages(key, id string, q url.Values) []map[string]any {
	g.t.Helper()
	var out []map[string]any
	cursor := ""
	for {
		qq := url.Values{}
		for k, v := range q {
			qq[k] = v
		}
		if cursor != "" {
			qq.Set("cursor", cursor)
		}
		r := g.do(http.MethodGet, "/api/batches/"+id+"/messages?"+qq.Encode(), key, nil)
		if r.status == http.StatusTooManyRequests { // 20 per second
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if r.status != 200 {
			g.t.Fatalf("list messages: %d %s", r.status, r.body)
		}
		page := r.json(g.t)
		for _, m := range page["messages"].([]any) {
			out = append(out, m.(map[string]any))
		}
		next, _ := page["next_cursor"].(string)
		if next == "" {
			return out
		}
		cursor = next
	}
}

// bigSegment gives the company a segment of n new contacts.
func (g *gw) bigSegment(companyID int64, n int) (int64, []string) {
	g.t.Helper()
	ctx := context.Background()
	var seg int64
	if err := g.pool.QueryRow(ctx, `INSERT INTO segments (company_id, name) VALUES ($1, 'everyone') RETURNING id`, companyID).Scan(&seg); err != nil {
		g.t.Fatal(err)
	}
	rows, err := g.pool.Query(ctx, `
		WITH c AS (
			INSERT INTO contacts (company_id, phone)
			SELECT $1, '+3940' || lpad(i::text, 7, '0') FROM generate_series(0, $2 - 1) i
			RETURNING id, phone
		), m AS (INSERT INTO segment_members (segment_id, contact_id) SELECT $3, id FROM c)
		SELECT phone FROM c`, companyID, n, seg)
	if err != nil {
		g.t.Fatal(err)
	}
	var phones []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			g.t.Fatal(err)
		}
		phones = append(phones, p)
	}
	if err := rows.Err(); err != nil || len(phones) != n {
		g.t.Fatalf("segment: %d phones, %v", len(phones), err)
	}
	return seg, phones
}

// TestCancelDuringALargeCampaign cancels a 10,000-contact campaign while
// two campaign dispatchers are claiming its messages as fast as the
// provider takes them: every message is either cancelled or sent, never
// both, and the provider never received a cancelled message, counted per
// recipient at the simulator.
func TestCancelDuringALargeCampaign(t *testing.T) {
	s := newStackOn(t, newGateway(t, gwOptions{}), 2)
	co := s.serve("acme")
	if _, err := s.pool.Exec(context.Background(), `UPDATE messaging_accounts SET throughput_per_second = 1000 WHERE id = $1`, co.account.ID); err != nil {
		t.Fatal(err)
	}
	const n = 10000
	seg, phones := s.bigSegment(co.company.ID, n)
	r := s.post("/api/campaigns/send", co.key, fmt.Sprintf(`{"campaign_id":%d,"segment_id":%d}`, co.campaign.ID, seg))
	if r.status != 202 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	id := r.json(t)["batch_id"].(string)
	// Under way: some sent, most still to go.
	s.waitBatch(co.key, id, 30*time.Second, func(b map[string]any) bool {
		c := counts(b)
		return c["sent"]+c["delivered"]+c["read"] >= 300
	})
	r = s.cancel(co.key, id)
	if r.status != 200 {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	res := r.json(t)
	cancelled := int(res["cancelled"].(float64))
	if cancelled < n/2 || counts(res)["cancelled"] != cancelled {
		t.Fatalf("cancelled %d of %d while under way: %s", cancelled, n, r.body)
	}

	b := s.waitBatch(co.key, id, 30*time.Second, completed)
	c := counts(b)
	handed := c["sent"] + c["delivered"] + c["read"] + c["failed"]
	if c["cancelled"] != cancelled || handed+c["cancelled"] != n || c["failed"] != 0 {
		t.Fatalf("after the cancel: counts %v, the cancel said %d", c, cancelled)
	}
	t.Logf("cancelled %d while under way; %d had been handed to the provider (counts %v)", cancelled, handed, c)
	// The provider's view, recipient by recipient.
	var got int64
	for _, p := range phones {
		got += s.sim.SendCount(p)
	}
	if dup := s.sim.Recipients(2, 10); len(dup) > 0 {
		t.Fatalf("recipients sent to twice: %v", dup)
	}
	if got != int64(handed) {
		t.Fatalf("the provider received %d messages, the batch counts %d handed to it", got, handed)
	}
	list := s.listMessages(co.key, id, url.Values{"state": {"cancelled"}, "limit": {"1000"}})
	if len(list) != cancelled {
		t.Fatalf("listed %d cancelled messages, want %d", len(list), cancelled)
	}
	for _, m := range list {
		p := m["phone"].(string)
		if k := s.sim.SendCount(p); k != 0 {
			t.Fatalf("cancelled message to %s reached the provider %d times", p, k)
		}
		times := m["times"].(map[string]any)
		if times["cancelled"] == nil || m["provider_message_id"] != nil {
			t.Fatalf("cancelled message %v", m)
		}
	}

	// A second cancel changes nothing.
	r = s.cancel(co.key, id)
	if r.status != 200 || r.json(t)["cancelled"] != float64(0) || counts(r.json(t))["cancelled"] != cancelled {
		t.Fatalf("second cancel: %d %s", r.status, r.body)
	}
}

// TestCancelScheduledSend: a scheduled send cancelled before its time is
// never sent, even once its time has come.
func TestCancelScheduledSend(t *testing.T) {
	s := newStack(t)
	co := s.serve("acme")
	at := s.clock.now().Add(time.Hour).Format(time.RFC3339)
	r := s.post("/api/campaigns/send", co.key, fmt.Sprintf(`{"campaign_id":%d,"contacts":["+393330000020","+393330000021"],"scheduled_at":%q}`, co.campaign.ID, at))
	if r.status != 202 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	id := r.json(t)["batch_id"].(string)
	s.waitBatch(co.key, id, 10*time.Second, func(b map[string]any) bool { return b["status"] == "scheduled" })

	// Another company cannot see or cancel it; nothing changes.
	rival := s.serve("rival")
	wantDetail(t, s.cancel(rival.key, id), 404, "Batch not found")
	if b := s.waitBatch(co.key, id, time.Second, func(map[string]any) bool { return true }); b["status"] != "scheduled" {
		t.Fatalf("after another company's cancel: %v", b)
	}
	wantDetail(t, s.do(http.MethodGet, "/api/batches/"+id+"/messages", rival.key, nil), 404, "Batch not found")

	// With an Idempotency-Key: the retry replays the first answer.
	r = s.cancel(co.key, id, "Idempotency-Key", "cancel-1")
	if r.status != 200 || r.json(t)["cancelled"] != float64(2) || r.json(t)["status"] != "cancelled" {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	again := s.cancel(co.key, id, "Idempotency-Key", "cancel-1")
	if again.status != 200 || string(again.body) != string(r.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %s %v", again.status, again.body, again.header)
	}
	// Without the key, a second cancel finds nothing left.
	if r := s.cancel(co.key, id); r.status != 200 || r.json(t)["cancelled"] != float64(0) {
		t.Fatalf("second cancel: %d %s", r.status, r.body)
	}

	s.clock.add(2 * time.Hour)
	time.Sleep(500 * time.Millisecond) // many polls of the dispatcher past the time
	for _, p := range []string{"+393330000020", "+393330000021"} {
		if n := s.sim.SendCount(p); n != 0 {
			t.Fatalf("%s received %d messages of a cancelled send", p, n)
		}
	}
	b := s.waitBatch(co.key, id, time.Second, func(map[string]any) bool { return true })
	if b["status"] != "cancelled" || counts(b)["cancelled"] != 2 || b["cancelled_at"] == nil {
		t.Fatalf("batch %v", b)
	}
	list := s.listMessages(co.key, id, url.Values{})
	if len(list) != 2 || list[0]["state"] != "cancelled" || list[0]["phone"] != "+393330000020" || list[1]["phone"] != "+393330000021" {
		t.Fatalf("messages %v", list)
	}
}

// TestCancelBatchStillInTheStream: no dispatcher runs yet, so the batch
// waits in the stream; cancelled there, its messages are created cancelled
// when a dispatcher gets to it, and the provider receives none.
func TestCancelBatchStillInTheStream(t *testing.T) {
	g := newGateway(t, gwOptions{})
	co := g.provision("acme")
	r := g.post("/api/campaigns/send", co.key, campaignBody(co.campaign.ID, "+393330000030", "+393330000031", "+393330000032"))
	if r.status != 202 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	id := r.json(t)["batch_id"].(string)
	if b := g.do(http.MethodGet, "/api/batches/"+id, co.key, nil); b.json(t)["status"] != "accepted" {
		t.Fatalf("before: %s", b.body)
	}
	// Listing a batch in the stream: no messages yet.
	if r := g.do(http.MethodGet, "/api/batches/"+id+"/messages", co.key, nil); r.status != 200 ||
		!strings.Contains(string(r.body), `"messages":[]`) || !strings.Contains(string(r.body), `"next_cursor":null`) {
		t.Fatalf("messages in the stream: %d %s", r.status, r.body)
	}
	r = g.cancel(co.key, id)
	if r.status != 200 || r.json(t)["cancelled"] != float64(3) || r.json(t)["status"] != "cancelled" || counts(r.json(t))["cancelled"] != 3 {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	if r := g.cancel(co.key, id); r.status != 200 || r.json(t)["cancelled"] != float64(0) || counts(r.json(t))["cancelled"] != 3 {
		t.Fatalf("second cancel: %d %s", r.status, r.body)
	}

	s := newStackOn(t, g, 1)
	if err := s.sim.SetAccount(whatsappsim.Account{PhoneNumberID: co.account.PhoneNumberID, Token: "tok", ThroughputPerSecond: 1000}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var list []map[string]any
	for len(list) < 3 {
		if time.Now().After(deadline) {
			t.Fatal("the dispatcher did not expand the batch")
		}
		time.Sleep(20 * time.Millisecond)
		list = s.listMessages(co.key, id, url.Values{})
	}
	if g.streamCount() != 0 {
		t.Fatalf("the stream still holds %d batches", g.streamCount())
	}
	for _, m := range list {
		if m["state"] != "cancelled" {
			t.Fatalf("message %v", m)
		}
	}
	time.Sleep(300 * time.Millisecond)
	for _, p := range []string{"+393330000030", "+393330000031", "+393330000032"} {
		if n := s.sim.SendCount(p); n != 0 {
			t.Fatalf("%s received %d messages", p, n)
		}
	}
	b := s.waitBatch(co.key, id, time.Second, func(map[string]any) bool { return true })
	if b["status"] != "cancelled" || counts(b)["cancelled"] != 3 {
		t.Fatalf("batch %v", b)
	}
}

// TestBatchControlRefusals: bad input to either endpoint is a clear 4xx
// and changes nothing.
func TestBatchControlRefusals(t *testing.T) {
	s := newStack(t)
	co := s.serve("acme")
	at := s.clock.now().Add(time.Hour).Format(time.RFC3339)
	r := s.post("/api/campaigns/send", co.key, fmt.Sprintf(`{"campaign_id":%d,"contacts":["+393330000040"],"scheduled_at":%q}`, co.campaign.ID, at))
	id := r.json(t)["batch_id"].(string)
	s.waitBatch(co.key, id, 10*time.Second, func(b map[string]any) bool { return b["status"] == "scheduled" })
	unchanged := func(what string) {
		t.Helper()
		var state string
		if err := s.pool.QueryRow(context.Background(), `SELECT state::text FROM messages WHERE batch_id = $1`, id).Scan(&state); err != nil || state != "scheduled" {
			t.Fatalf("%s changed the message: %s %v", what, state, err)
		}
	}

	wantDetail(t, s.cancel(co.key, "not-a-uuid"), 404, "Batch not found")
	wantDetail(t, s.cancel(co.key, "0193a5c4-7f1e-7cc2-9d5e-3b8f2a61c0de"), 404, "Batch not found")
	wantDetail(t, s.cancel("", id), 401, "Invalid API key")
	if r := s.post("/api/batches/"+id+"/cancel", co.key, `{"a":`); r.status != 422 || !strings.Contains(string(r.body), `"json_invalid"`) {
		t.Fatalf("broken JSON: %d %s", r.status, r.body)
	}
	if r := s.post("/api/batches/"+id+"/cancel", co.key, `[1]`); r.status != 422 || !strings.Contains(string(r.body), `"model_attributes_type"`) {
		t.Fatalf("array body: %d %s", r.status, r.body)
	}
	if r := s.cancel(co.key, id, "Idempotency-Key", strings.Repeat("k", 300)); r.status != 422 || !strings.Contains(string(r.body), "idempotency_key_invalid") {
		t.Fatalf("bad key: %d %s", r.status, r.body)
	}
	unchanged("refused cancels")

	list := func(q string) response { return s.do(http.MethodGet, "/api/batches/"+id+"/messages?"+q, co.key, nil) }
	for _, c := range []struct{ q, typ, loc string }{
		{"limit=0", "greater_than_equal", "limit"},
		{"limit=1001", "less_than_equal", "limit"},
		{"limit=ten", "int_parsing", "limit"},
		{"state=sent,lost", "enum", "state"},
		{"state=", "enum", "state"},
		{"cursor=", "cursor_invalid", "cursor"},
		{"cursor=bm9wZQ", "cursor_invalid", "cursor"},
	} {
		r := list(c.q)
		if r.status != 422 || !strings.Contains(string(r.body), `"type":"`+c.typ+`"`) || !strings.Contains(string(r.body), `"loc":["query","`+c.loc+`"]`) {
			t.Errorf("%s: %d %s", c.q, r.status, r.body)
		}
	}
	wantDetail(t, s.do(http.MethodGet, "/api/batches/nope/messages?limit=5", co.key, nil), 404, "Batch not found")
	wantDetail(t, s.do(http.MethodGet, "/api/batches/0193a5c4-7f1e-7cc2-9d5e-3b8f2a61c0de/messages", co.key, nil), 404, "Batch not found")
	if r := list("state=scheduled&state=failed&limit=1000"); r.status != 200 || !strings.Contains(string(r.body), `"state":"scheduled"`) {
		t.Fatalf("good query: %d %s", r.status, r.body)
	}
	unchanged("refused listings")
	s.waitBatch(co.key, id, time.Second, func(b map[string]any) bool { return b["status"] == "scheduled" })
}

// TestMessagesCursorWhileStatesChange pages through a campaign's messages
// while they are being sent: every message is listed exactly once.
func TestMessagesCursorWhileStatesChange(t *testing.T) {
	s := newStack(t)
	co := s.serve("acme")
	var contacts []string
	for i := range 600 {
		contacts = append(contacts, fmt.Sprintf("+39333%07d", 100+i))
	}
	r := s.post("/api/campaigns/send", co.key, campaignBody(co.campaign.ID, contacts...))
	if r.status != 202 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	id := r.json(t)["batch_id"].(string)
	// Expanded, and sending at the account's 80 per second: paging takes a
	// few seconds (20 pages per second) while states change under it.
	s.waitBatch(co.key, id, 10*time.Second, func(b map[string]any) bool {
		c := counts(b)
		return c["queued"]+c["sending"]+c["sent"]+c["delivered"]+c["read"] == 600 && c["queued"] > 0
	})
	seen := map[string]bool{}
	states := map[string]bool{}
	for _, m := range s.listMessages(co.key, id, url.Values{"limit": {"7"}}) {
		p := m["phone"].(string)
		if seen[p] {
			t.Fatalf("%s listed twice", p)
		}
		seen[p] = true
		states[m["state"].(string)] = true
	}
	if len(seen) != 600 {
		t.Fatalf("listed %d of 600", len(seen))
	}
	t.Logf("states seen while paging: %v", states)

	// Paging through the queued ones while they leave that state: an offset
	// would skip some; the cursor lists each at most once, each in the
	// state asked for, and every message still queued afterwards (it matched
	// throughout) was listed.
	listed := map[string]bool{}
	for _, m := range s.listMessages(co.key, id, url.Values{"state": {"queued"}, "limit": {"7"}}) {
		p := m["phone"].(string)
		if listed[p] || m["state"] != "queued" {
			t.Fatalf("%s listed twice, or in state %v", p, m["state"])
		}
		listed[p] = true
	}
	rows, err := s.pool.Query(context.Background(), `SELECT phone FROM messages WHERE batch_id = $1 AND state = 'queued'`, id)
	if err != nil {
		t.Fatal(err)
	}
	still := 0
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		still++
		if !listed[p] {
			t.Fatalf("%s was queued throughout but not listed", p)
		}
	}
	rows.Close()
	t.Logf("listed %d queued messages; %d still queued afterwards", len(listed), still)
	if still == 0 {
		t.Log("every message left the queue while paging: the check above proved nothing this time")
	}
	s.waitBatch(co.key, id, 20*time.Second, completed)
	// The outcome of a delivered message, with its times.
	list := s.listMessages(co.key, id, url.Values{"state": {"delivered,read"}, "limit": {"1000"}})
	if len(list) == 0 {
		t.Fatal("no delivered or read message")
	}
	m := list[0]
	times := m["times"].(map[string]any)
	if m["provider_message_id"] == nil || m["attempts"] != float64(1) || times["created"] == nil || times["sending"] == nil ||
		times["sent"] == nil || times["delivered"] == nil {
		t.Fatalf("message %v", m)
	}
}
