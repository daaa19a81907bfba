package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
	"github.com/parleyhq/parley/testkit/storetest"
)

// waitMessage reads GET /api/messages/{id} until its state is one of
// states.
func (s *stack) waitMessage(key string, id any, within time.Duration, states ...string) map[string]any {
	s.t.Helper()
	deadline := time.Now().Add(within)
	var last map[string]any
	for {
		r := s.do(http.MethodGet, fmt.Sprintf("/api/messages/%v", id), key, nil)
		if r.status == 200 {
			last = r.json(s.t)
			for _, st := range states {
				if last["state"] == st {
					return last
				}
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("message %v: last seen %v (status %d), want %v", id, last, r.status, states)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConversationEndToEnd: a contact writes in through the provider's
// webhook; the company sees the conversation, answers inside the window
// quoting the question, the answer reaches the provider and is tracked
// like any message; the thread shows both directions.
func TestConversationEndToEnd(t *testing.T) {
	s := newStack(t)
	tn := s.serve("conv")
	storetest.Subscribe(t, s.pool, tn.company.ID) // message.received events
	phone := "+14155550100"
	q := s.reply(tn, whatsappsim.Reply{From: phone, Name: "Ana", Text: "Is my order shipped?"})
	if n := s.outbox(tn.company.ID, "message.received"); n != 1 {
		t.Fatalf("%d message.received events, want 1", n)
	}

	r := s.do(http.MethodGet, "/api/contacts/"+phone, tn.key, nil)
	if r.status != 200 {
		t.Fatalf("GET contact: %d %s", r.status, r.body)
	}
	c := r.json(t)
	windows, _ := c["windows"].([]any)
	if c["profile_name"] != "Ana" || len(windows) != 1 || windows[0].(map[string]any)["open"] != true {
		t.Fatalf("contact %s", r.body)
	}
	r = s.do(http.MethodGet, "/api/conversations", tn.key, nil)
	if r.status != 200 || !strings.Contains(string(r.body), "Is my order shipped?") {
		t.Fatalf("GET /api/conversations: %d %s", r.status, r.body)
	}

	r = s.post("/api/messages", tn.key, fmt.Sprintf(`{"to":%q,"type":"text","text":{"body":"Yes, it left today"},"context":{"message_id":%q}}`, phone, q.ID))
	if r.status != 202 {
		t.Fatalf("reply: %d %s", r.status, r.body)
	}
	ans := r.json(t)
	id := int64(ans["message_id"].(float64))
	if ans["status"] != "accepted" || id <= 0 || r.header.Get("Location") != fmt.Sprintf("/api/messages/%d", id) {
		t.Fatalf("202 %s, Location %q", r.body, r.header.Get("Location"))
	}
	// The number as the contact's digits, without its +, is the same contact.
	r = s.post("/api/messages", tn.key, fmt.Sprintf(`{"to":%q,"type":"reaction","reaction":{"message_id":%q,"emoji":"👍"}}`,
		strings.TrimPrefix(phone, "+"), q.ID))
	if r.status != 202 {
		t.Fatalf("reaction to a number without its +: %d %s", r.status, r.body)
	}
	s.waitMessage(tn.key, int64(r.json(t)["message_id"].(float64)), 10*time.Second, "sent", "delivered", "read")
	m := s.waitMessage(tn.key, id, 10*time.Second, "delivered", "read")
	if m["kind"] != "reply" || m["direction"] != "outbound" {
		t.Fatalf("the reply: %v", m)
	}
	if got := s.sim.SendCount(strings.TrimPrefix(phone, "+")); got != 2 {
		t.Fatalf("provider-sim received %d messages for %s, want 2 (the answer and the reaction)", got, phone)
	}

	r = s.do(http.MethodGet, "/api/contacts/"+phone+"/messages", tn.key, nil)
	var page struct {
		Messages []struct {
			Direction string          `json:"direction"`
			ID        int64           `json:"message_id"`
			Type      string          `json:"type"`
			Content   json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(r.body, &page); err != nil || r.status != 200 {
		t.Fatalf("thread: %d %s", r.status, r.body)
	}
	if len(page.Messages) != 3 || page.Messages[1].Direction != "outbound" || page.Messages[1].ID != id ||
		page.Messages[2].Direction != "inbound" || page.Messages[2].Type != "text" {
		t.Fatalf("thread, newest first: %s", r.body)
	}
	// The inbound message by its wamid, as a support ticket quotes it.
	if r = s.do(http.MethodGet, "/api/messages/"+q.ID, tn.key, nil); r.status != 200 || r.json(t)["direction"] != "inbound" {
		t.Fatalf("inbound by wamid: %d %s", r.status, r.body)
	}
	// Another company sees none of it.
	other := s.serve("conv-other")
	for _, path := range []string{"/api/contacts/" + phone, "/api/contacts/" + phone + "/messages", fmt.Sprintf("/api/messages/%d", id)} {
		if r := s.do(http.MethodGet, path, other.key, nil); r.status != 404 {
			t.Errorf("another company's GET %s: %d %s", path, r.status, r.body)
		}
	}
}

// TestReplyOutsideTheWindow: free-form to a contact whose window closed,
// or who never wrote, is a 422 saying when it ended and that a template is
// needed; a template goes at any time.
func TestReplyOutsideTheWindow(t *testing.T) {
	s := newStack(t)
	tn := s.serve("window")
	old := "+14155550200"
	s.reply(tn, whatsappsim.Reply{From: old, Text: "hello", Timestamp: time.Now().Add(-25 * time.Hour).Unix()})
	before := s.streamCount()
	r := s.post("/api/messages", tn.key, fmt.Sprintf(`{"to":%q,"type":"text","text":{"body":"late answer"}}`, old))
	detail, _ := r.json(t)["detail"].(string)
	if r.status != 422 || !strings.Contains(detail, "ended at") || !strings.Contains(detail, "template") {
		t.Fatalf("outside the window: %d %s", r.status, r.body)
	}
	r = s.post("/api/messages", tn.key, `{"to":"+14155550201","type":"text","text":{"body":"hi"}}`)
	if detail, _ := r.json(t)["detail"].(string); r.status != 422 || !strings.Contains(detail, "never written") {
		t.Fatalf("never wrote: %d %s", r.status, r.body)
	}
	if s.streamCount() != before {
		t.Fatal("a refused reply reached the stream")
	}
	r = s.post("/api/messages", tn.key, fmt.Sprintf(`{"to":%q,"type":"template","template":{"name":"hello","variables":{"order_id":"A-7"}}}`, old))
	if r.status != 202 {
		t.Fatalf("template outside the window: %d %s", r.status, r.body)
	}
	s.waitMessage(tn.key, int64(r.json(t)["message_id"].(float64)), 10*time.Second, "sent", "delivered", "read")
	// A template to a number that never wrote needs the number to send from.
	r = s.post("/api/messages", tn.key, `{"to":"+14155550202","type":"template","template":{"name":"hello"}}`)
	if r.status != 422 || !strings.Contains(string(r.body), "messaging_account_id") {
		t.Fatalf("template without a number: %d %s", r.status, r.body)
	}
	r = s.post("/api/messages", tn.key, fmt.Sprintf(`{"to":"+14155550202","type":"template","template":{"name":"hello"},"messaging_account_id":%d}`, tn.account.ID))
	if r.status != 202 {
		t.Fatalf("template from a named number: %d %s", r.status, r.body)
	}
	r = s.post("/api/messages", tn.key, fmt.Sprintf(`{"to":%q,"type":"template","template":{"name":"nope"}}`, old))
	if r.status != 404 {
		t.Fatalf("unknown template: %d %s", r.status, r.body)
	}
}

// TestReplyValidation: the Cloud API's own limits, in the spec's 422 shape,
// with nothing accepted.
func TestReplyValidation(t *testing.T) {
	s := newStack(t)
	tn := s.serve("replyval")
	phone := "+14155550300"
	s.reply(tn, whatsappsim.Reply{From: phone, Text: "hi"})
	before := s.streamCount()
	long := strings.Repeat("a", 4097)
	for _, c := range []struct {
		body string
		loc  string
	}{
		{`{"type":"text","text":{"body":"x"}}`, `["body","to"]`},
		{fmt.Sprintf(`{"to":%q,"type":"fax"}`, phone), `["body","type"]`},
		{fmt.Sprintf(`{"to":%q,"type":"text","text":{"body":%q}}`, phone, long), `["body","text","body"]`},
		{fmt.Sprintf(`{"to":%q,"type":"text","text":{"body":5}}`, phone), `["body","text","body"]`},
		{fmt.Sprintf(`{"to":%q,"type":"image","image":{"link":"http://x.example/a.png"}}`, phone), `["body","image","link"]`},
		{fmt.Sprintf(`{"to":%q,"type":"interactive","interactive":{"type":"button","body":{"text":"Pick"},"action":{"buttons":[
			{"type":"reply","reply":{"id":"a","title":"A"}},{"type":"reply","reply":{"id":"b","title":"B"}},
			{"type":"reply","reply":{"id":"c","title":"C"}},{"type":"reply","reply":{"id":"d","title":"D"}}]}}}`, phone), `["body","interactive","action","buttons"]`},
		{fmt.Sprintf(`{"to":%q,"type":"text","text":{"body":"x"},"context":{"message_id":"wamid.unknown"}}`, phone), `["body","context","message_id"]`},
		{fmt.Sprintf(`{"to":%q,"type":"text","text":{"body":"x"},"messaging_account_id":999999}`, phone), ``},
	} {
		r := s.post("/api/messages", tn.key, c.body)
		if c.loc == "" {
			if r.status != 404 {
				t.Errorf("%.80s: %d %s, want 404", c.body, r.status, r.body)
			}
			continue
		}
		if r.status != 422 || !strings.Contains(string(r.body), `"loc":`+c.loc) || !strings.Contains(string(r.body), `"msg":`) {
			t.Errorf("%.80s: %d %s, want 422 at %s", c.body, r.status, r.body, c.loc)
		}
	}
	if s.streamCount() != before {
		t.Fatal("an invalid reply reached the stream")
	}
}

// TestEraseContactEndToEnd: DELETE /api/contacts/{phone} erases the
// contact and its conversation; the batch keeps its counts.
func TestEraseContactEndToEnd(t *testing.T) {
	s := newStack(t)
	tn := s.serve("erase")
	phone := "+14155550400"
	s.reply(tn, whatsappsim.Reply{From: phone, Name: "Ana", Text: "please forget me"})
	r := s.do(http.MethodDelete, "/api/contacts/"+phone, tn.key, nil)
	if r.status != 200 {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	if e := r.json(t); e["contact"] != true || e["inbound_messages"].(float64) != 1 {
		t.Fatalf("erasure %s", r.body)
	}
	for _, path := range []string{"/api/contacts/" + phone, "/api/contacts/" + phone + "/messages"} {
		if r := s.do(http.MethodGet, path, tn.key, nil); r.status != 404 {
			t.Errorf("GET %s after the erasure: %d %s", path, r.status, r.body)
		}
	}
	s.resetLimit("contact_erase", tn.company.ID)
	if r := s.do(http.MethodDelete, "/api/contacts/"+phone, tn.key, nil); r.status != 200 || r.json(t)["contact"] != false {
		t.Fatalf("a second DELETE: %d %s", r.status, r.body)
	}
	s.resetLimit("contact_erase", tn.company.ID)
	if r := s.do(http.MethodDelete, "/api/contacts/not-a-number", tn.key, nil); r.status != 422 {
		t.Fatalf("DELETE of a bad number: %d %s", r.status, r.body)
	}
}

// TestInboundOfEveryType: each type the Cloud API delivers, played by
// provider-sim in the webhook's wire format, is recorded with its content
// and listed in the conversation; a repeated webhook is recorded once.
func TestInboundOfEveryType(t *testing.T) {
	s := newStack(t)
	tn := s.serve("types")
	phone := "+14155550500"
	for _, m := range []string{
		`{"type":"text","text":{"body":"hello"}}`,
		`{"type":"button","button":{"payload":"YES","text":"Yes"}}`,
		`{"type":"interactive","interactive":{"type":"list_reply","list_reply":{"id":"slot-2","title":"Tuesday","description":"9-12"}}}`,
		`{"type":"image","image":{"mime_type":"image/jpeg","caption":"the receipt"}}`,
		`{"type":"video","video":{"mime_type":"video/mp4"}}`,
		`{"type":"audio","audio":{"mime_type":"audio/ogg","voice":true}}`,
		`{"type":"document","document":{"mime_type":"application/pdf","filename":"invoice.pdf","caption":"invoice"}}`,
		`{"type":"sticker","sticker":{"mime_type":"image/webp","animated":false}}`,
		`{"type":"location","location":{"latitude":45.46,"longitude":9.19,"name":"Duomo"}}`,
		`{"type":"contacts","contacts":[{"name":{"formatted_name":"Bob"},"phones":[{"phone":"+393330000000"}]}]}`,
		`{"type":"reaction","reaction":{"message_id":"wamid.x","emoji":"👍"}}`,
		`{"type":"order","order":{"catalog_id":"1"}}`,
	} {
		s.reply(tn, whatsappsim.Reply{From: phone, Name: "Ana", Message: json.RawMessage(m)})
	}
	r := s.do(http.MethodGet, "/api/contacts/"+phone+"/messages?limit=100", tn.key, nil)
	var page struct {
		Messages []struct {
			Type    string `json:"type"`
			Summary string `json:"summary"`
			Content map[string]json.RawMessage
		} `json:"messages"`
	}
	if err := json.Unmarshal(r.body, &page); err != nil || r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var types []string
	for _, m := range page.Messages {
		types = append([]string{m.Type}, types...)
		if _, ok := m.Content[m.Type]; !ok || m.Summary == "" {
			t.Errorf("%s: content %v, summary %q", m.Type, m.Content, m.Summary)
		}
	}
	want := []string{"text", "button", "interactive", "image", "video", "audio", "document", "sticker", "location", "contacts", "reaction", "unsupported"}
	if strings.Join(types, ",") != strings.Join(want, ",") {
		t.Fatalf("recorded %v, want %v", types, want)
	}
	if !strings.Contains(string(r.body), `"mime_type":"image/jpeg"`) || !strings.Contains(string(r.body), `"sha256":`) ||
		!strings.Contains(string(r.body), `"type":"order"`) {
		t.Fatalf("media and the unsupported type's raw type are kept: %s", r.body)
	}
	// Meta repeats a webhook: the same wamid again changes nothing.
	first := s.reply(tn, whatsappsim.Reply{From: phone, Text: "once"})
	s.reply(tn, whatsappsim.Reply{From: phone, Text: "once", ID: first.ID})
	var n int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM inbound_messages WHERE wamid = $1`, first.ID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("a repeated wamid recorded %d times (%v)", n, err)
	}
}

// TestOptedOutContactCanBeAnswered: opt-out is about campaigns; a contact
// who sent STOP is still answered inside the window it opened.
func TestOptedOutContactCanBeAnswered(t *testing.T) {
	s := newStack(t)
	tn := s.serve("optout-reply")
	phone := "+14155550600"
	s.reply(tn, whatsappsim.Reply{From: phone, Text: "STOP"})
	if c, ok := s.contact(tn.company.ID, phone); !ok || !c.OptedOut() {
		t.Fatalf("STOP did not opt the contact out: %+v", c)
	}
	r := s.post("/api/messages", tn.key, fmt.Sprintf(`{"to":%q,"type":"text","text":{"body":"You will not get campaigns any more."}}`, phone))
	if r.status != 202 {
		t.Fatalf("reply to an opted-out contact: %d %s", r.status, r.body)
	}
	s.waitMessage(tn.key, int64(r.json(t)["message_id"].(float64)), 10*time.Second, "sent", "delivered", "read")
}

// TestReplyIdempotencyKey: a retried reply with the same key is the same
// message, answered the same (Location included), sent once.
func TestReplyIdempotencyKey(t *testing.T) {
	s := newStack(t)
	tn := s.serve("reply-idem")
	phone := "+14155550700"
	s.reply(tn, whatsappsim.Reply{From: phone, Text: "hi"})
	body := fmt.Sprintf(`{"to":%q,"type":"text","text":{"body":"hello"}}`, phone)
	a := s.post("/api/messages", tn.key, body, "Idempotency-Key", "reply-1")
	b := s.post("/api/messages", tn.key, body, "Idempotency-Key", "reply-1")
	if a.status != 202 || b.status != 202 || string(a.body) != string(b.body) || a.header.Get("Location") != b.header.Get("Location") ||
		b.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("first %d %s %q, retry %d %s %q", a.status, a.body, a.header.Get("Location"), b.status, b.body, b.header.Get("Location"))
	}
	s.waitMessage(tn.key, int64(a.json(t)["message_id"].(float64)), 10*time.Second, "sent", "delivered", "read")
	if n := s.sim.SendCount(strings.TrimPrefix(phone, "+")); n != 1 {
		t.Fatalf("provider-sim got %d messages, want 1", n)
	}
}

// TestWindowClosedAtTheProvider: a reply accepted while Parley saw the
// window open, refused by WhatsApp because it closed before the send
// (131047 in a failed status), fails with the provider's code and title.
// provider-sim's window is shortened to 1 s to make it happen.
func TestWindowClosedAtTheProvider(t *testing.T) {
	s := newStack(t)
	tn := s.serve("closed-at-provider")
	if err := s.sim.SetRules(whatsappsim.Rules{ServiceWindow: time.Second, EnforceServiceWindow: true,
		ServiceWindowError: whatsappsim.WindowErrorStatus}); err != nil {
		t.Fatal(err)
	}
	phone := "+14155550800"
	s.reply(tn, whatsappsim.Reply{From: phone, Text: "hi"})
	time.Sleep(1100 * time.Millisecond)
	r := s.post("/api/messages", tn.key, fmt.Sprintf(`{"to":%q,"type":"text","text":{"body":"late"}}`, phone))
	if r.status != 202 {
		t.Fatalf("Parley's window is open: %d %s", r.status, r.body)
	}
	m := s.waitMessage(tn.key, int64(r.json(t)["message_id"].(float64)), 10*time.Second, "failed")
	if m["error_code"] != float64(131047) || m["error_title"] == nil {
		t.Fatalf("the reply: %v", m)
	}
}
