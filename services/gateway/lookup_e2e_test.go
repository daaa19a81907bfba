package main

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// listBatches pages through GET /api/batches with query q (without
// cursor), page size limit, and returns the batch ids in order.
func (s *stack) listBatches(key string, q url.Values, limit int) []string {
	s.t.Helper()
	var ids []string
	q.Set("limit", fmt.Sprint(limit))
	for {
		r := s.do(http.MethodGet, "/api/batches?"+q.Encode(), key, nil)
		if r.status == http.StatusTooManyRequests { // 10 per second
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if r.status != 200 || r.header.Get("X-RateLimit-Limit") != "10" {
			s.t.Fatalf("list batches %s: %d %s %v", q.Encode(), r.status, r.body, r.header)
		}
		page := r.json(s.t)
		items := page["batches"].([]any)
		if len(items) > limit {
			s.t.Fatalf("a page of %d for a limit of %d", len(items), limit)
		}
		for _, it := range items {
			b := it.(map[string]any)
			if _, ok := b["counts"]; ok {
				s.t.Fatalf("a listed batch has counts: %v", b)
			}
			ids = append(ids, b["batch_id"].(string))
		}
		next, _ := page["next_cursor"].(string)
		if next == "" {
			return ids
		}
		q.Set("cursor", next)
	}
}

// TestListBatchesAndFindMessages: a company's sends listed newest first
// with their names, paged and filtered; each message found by its id and
// its wamid; nothing of another company's; bad queries 422 at
// ["query", name].
func TestListBatchesAndFindMessages(t *testing.T) {
	s := newStack(t)
	co := s.serve("acme")
	send := func(path, body string) string {
		t.Helper()
		r := s.post(path, co.key, body)
		id, _ := r.json(t)["batch_id"].(string)
		if r.status != 202 || r.header.Get("Location") != "/api/batches/"+id {
			t.Fatalf("%s: %d %s, Location %q", path, r.status, r.body, r.header.Get("Location"))
		}
		s.waitBatch(co.key, id, 15*time.Second, completed)
		return id
	}
	camp := send("/api/campaigns/send", fmt.Sprintf(`{"campaign_id":%d,"contacts":["+393330000031","+393330000032"]}`, co.campaign.ID))
	auto := send("/api/automations/send", fmt.Sprintf(`{"automation_id":%d,"contacts":[{"phone":"+393330000033","variables":{"order_id":"A-1"}}]}`,
		co.automation.ID))

	for _, limit := range []int{1, 2, 50} {
		if got := s.listBatches(co.key, url.Values{}, limit); !slices.Equal(got, []string{auto, camp}) {
			t.Fatalf("pages of %d: %v, want %v (newest first)", limit, got, []string{auto, camp})
		}
	}
	r := s.do(http.MethodGet, "/api/batches", co.key, nil)
	items := r.json(t)["batches"].([]any)
	a, c := items[0].(map[string]any), items[1].(map[string]any)
	if a["kind"] != "automation" || a["automation_name"] != co.automation.Name || a["automation_id"] != float64(co.automation.ID) ||
		a["status"] != "completed" || a["completed_at"] == nil {
		t.Fatalf("automation batch listed as %v", a)
	}
	if c["kind"] != "campaign" || c["campaign_name"] != co.campaign.Name || c["source"] != "api:campaigns_send" || c["contacts"] != float64(2) {
		t.Fatalf("campaign batch listed as %v", c)
	}
	future := s.clock.now().Add(time.Hour).Format(time.RFC3339)
	for q, want := range map[string][]string{
		"kind=automation": {auto},
		fmt.Sprintf("campaign_id=%d", co.campaign.ID):     {camp},
		fmt.Sprintf("automation_id=%d", co.automation.ID): {auto},
		"status=completed":                    {auto, camp},
		"status=processing":                   nil,
		"source=api:campaigns_send":           {camp},
		"since=" + url.QueryEscape(future):    nil,
		"until=" + url.QueryEscape(future):    {auto, camp},
		"kind=campaign&source=connector:shop": nil,
	} {
		v, err := url.ParseQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.listBatches(co.key, v, 10); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", q, got, want)
		}
	}

	// Each message, by its message_id and by its wamid.
	for _, m := range s.listMessages(co.key, camp, url.Values{}) {
		wamid, _ := m["provider_message_id"].(string)
		if wamid == "" {
			t.Fatalf("a delivered message without its wamid: %v", m)
		}
		for _, key := range []string{fmt.Sprint(m["message_id"]), wamid} {
			r := s.do(http.MethodGet, "/api/messages/"+url.PathEscape(key), co.key, nil)
			f := r.json(t)
			if r.status != 200 || f["message_id"] != m["message_id"] || f["phone"] != m["phone"] || f["batch_id"] != camp ||
				f["kind"] != "campaign" || f["lane"] != "campaign" || f["provider_message_id"] != wamid {
				t.Fatalf("GET /api/messages/%s: %d %s, listed as %v", key, r.status, r.body, m)
			}
		}
	}

	// Each number's messages, with or without its +.
	for phone, want := range map[string]string{"+393330000031": camp, "393330000033": auto} {
		r := s.do(http.MethodGet, "/api/contacts/"+url.PathEscape(phone)+"/messages", co.key, nil)
		page := r.json(t)
		msgs, _ := page["messages"].([]any)
		if r.status != 200 || page["phone"] != "+"+strings.TrimPrefix(phone, "+") || len(msgs) != 1 ||
			msgs[0].(map[string]any)["batch_id"] != want || page["next_cursor"] != nil {
			t.Fatalf("messages to %s: %d %s", phone, r.status, r.body)
		}
	}
	wantDetail(t, s.do(http.MethodGet, "/api/contacts/+15550000000/messages", co.key, nil), 404, "Contact not found")
	if r := s.do(http.MethodGet, "/api/contacts/12/messages", co.key, nil); r.status != 422 ||
		!strings.HasPrefix(string(r.body), `{"detail":[{"type":"string_pattern_mismatch","loc":["path","phone"]`) {
		t.Fatalf("a bad number: %d %s", r.status, r.body)
	}
	if r := s.do(http.MethodGet, "/api/contacts/+393330000031/messages?limit=101", co.key, nil); r.status != 422 {
		t.Fatalf("limit 101: %d %s", r.status, r.body)
	}

	// Another company sees none of it.
	rival := s.serve("rival")
	wantDetail(t, s.do(http.MethodGet, "/api/contacts/+393330000031/messages", rival.key, nil), 404, "Contact not found")
	if got := s.listBatches(rival.key, url.Values{}, 10); len(got) != 0 {
		t.Fatalf("another company lists %v", got)
	}
	m := s.listMessages(co.key, auto, url.Values{})[0]
	for _, key := range []string{fmt.Sprint(m["message_id"]), m["provider_message_id"].(string), "99999999", "wamid.none", "x"} {
		wantDetail(t, s.do(http.MethodGet, "/api/messages/"+url.PathEscape(key), rival.key, nil), 404, "Message not found")
	}

	for q, loc := range map[string]string{
		"status=done":      "status",
		"kind=sms":         "kind",
		"limit=0":          "limit",
		"limit=101":        "limit",
		"limit=ten":        "limit",
		"campaign_id=abc":  "campaign_id",
		"automation_id=0":  "automation_id",
		"since=yesterday":  "since",
		"until=2026-01-01": "until",
		"cursor=":          "cursor",
		"cursor=bm9wZQ":    "cursor",
		"source=":          "source",
		"since=2026-02-01T00:00:00Z&until=2026-01-01T00:00:00Z": "until",
	} {
		r := s.do(http.MethodGet, "/api/batches?"+q, co.key, nil)
		for r.status == http.StatusTooManyRequests { // 10 per second, counted before the query's checks
			time.Sleep(100 * time.Millisecond)
			r = s.do(http.MethodGet, "/api/batches?"+q, co.key, nil)
		}
		want := regexp.MustCompile(`^\{"detail":\[\{"type":"[a-z_]+","loc":\["query","` + loc + `"\],"msg":"[^"]+","input":`)
		if r.status != 422 || !want.Match(r.body) {
			t.Errorf("?%s: %d %s, want a 422 at [query, %s]", q, r.status, r.body, loc)
		}
	}
}

// TestRequestID: every answer carries X-Request-ID, the caller's when it
// is sane, else a new one; a 202 carries Location.
func TestRequestID(t *testing.T) {
	g := newGateway(t, gwOptions{})
	co := g.fresh()
	uuidRe := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	for _, c := range []struct {
		name, method, path, key, sent string
		status                        int
		echoed                        bool
	}{
		{"kept on a 200", http.MethodGet, "/api/batches", co.key, "ticket-42.a_b:c+d", 200, true},
		{"kept on a 401", http.MethodGet, "/api/batches", "", "req-401", 401, true},
		{"kept on a 404", http.MethodGet, "/api/nothing", co.key, "req-404", 404, true},
		{"made when absent", http.MethodGet, "/api/batches", co.key, "", 200, false},
		{"made for a space", http.MethodGet, "/api/batches", co.key, "two words", 200, false},
		{"made for a quote", http.MethodGet, "/api/batches", co.key, `a"b`, 200, false},
		{"made when too long", http.MethodGet, "/api/batches", co.key, strings.Repeat("a", 129), 200, false},
		{"on the docs", http.MethodGet, "/api/openapi.json", "", "docs-1", 200, true},
	} {
		var headers []string
		if c.sent != "" {
			headers = []string{"X-Request-ID", c.sent}
		}
		r := g.do(c.method, c.path, c.key, nil, headers...)
		got := r.header.Values("X-Request-ID")
		if r.status != c.status || len(got) != 1 || (c.echoed && got[0] != c.sent) || (!c.echoed && !uuidRe.MatchString(got[0])) {
			t.Errorf("%s: %d, X-Request-ID %q (sent %q)", c.name, r.status, got, c.sent)
		}
	}
	r := g.post("/api/campaigns/send", co.key, fmt.Sprintf(`{"campaign_id":%d,"contacts":["+393330000041"]}`, co.campaign.ID))
	id, _ := r.json(t)["batch_id"].(string)
	if r.status != 202 || r.header.Get("Location") != "/api/batches/"+id || r.header.Get("X-Request-ID") == "" {
		t.Fatalf("202: %d %s %v", r.status, r.body, r.header)
	}
	if b := g.do(http.MethodGet, r.header.Get("Location"), co.key, nil); b.status != 200 || b.json(t)["batch_id"] != id {
		t.Fatalf("GET Location: %d %s", b.status, b.body)
	}
	// A replay of an Idempotency-Key answers the same Location.
	body := fmt.Sprintf(`{"campaign_id":%d,"contacts":["+393330000042"]}`, co.campaign.ID)
	first := g.post("/api/campaigns/send", co.key, body, "Idempotency-Key", "loc-1")
	replay := g.post("/api/campaigns/send", co.key, body, "Idempotency-Key", "loc-1")
	id, _ = first.json(t)["batch_id"].(string)
	if first.status != 202 || replay.status != 202 || replay.header.Get("Idempotent-Replayed") != "true" ||
		replay.header.Get("Location") != "/api/batches/"+id || first.header.Get("Location") != "/api/batches/"+id {
		t.Fatalf("replay: %d %v, first %d %v", replay.status, replay.header, first.status, first.header)
	}
}
