package whatsappsim_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
)

const user = "+14155550100"

func sessions() map[string]whatsapp.Session {
	link := "https://cdn.example/f"
	return map[string]whatsapp.Session{
		"text":     {Type: "text", Text: &whatsapp.SessionText{Body: "Your parcel left the depot.", PreviewURL: true}},
		"image":    {Type: "image", Image: &whatsapp.SessionMedia{Link: link + ".jpg", Caption: "label"}},
		"video":    {Type: "video", Video: &whatsapp.SessionMedia{Link: link + ".mp4"}},
		"audio":    {Type: "audio", Audio: &whatsapp.SessionMedia{Link: link + ".ogg"}},
		"document": {Type: "document", Document: &whatsapp.SessionMedia{Link: link + ".pdf", Filename: "invoice.pdf", Caption: "invoice"}},
		"sticker":  {Type: "sticker", Sticker: &whatsapp.SessionMedia{Link: link + ".webp"}},
		"buttons": {Type: "interactive", Interactive: &whatsapp.SessionInteractive{Type: "button", Body: whatsapp.InteractiveText{Text: "Deliver when?"},
			Action: whatsapp.InteractiveAction{Buttons: []whatsapp.InteractiveButton{{Type: "reply", Reply: whatsapp.InteractiveReply{ID: "am", Title: "Morning"}}}}}},
		"list": {Type: "interactive", Interactive: &whatsapp.SessionInteractive{Type: "list", Body: whatsapp.InteractiveText{Text: "Pick one"},
			Action: whatsapp.InteractiveAction{Button: "Options", Sections: []whatsapp.InteractiveSection{{Rows: []whatsapp.InteractiveRow{{ID: "a", Title: "A"}}}}}}},
		"reaction": {Type: "reaction", Reaction: &whatsapp.SessionReaction{MessageID: "wamid.in", Emoji: "🙏"}},
	}
}

// reply plays a user's text, which opens the window.
func (e *env) reply(t *testing.T, from string, ts int64) {
	t.Helper()
	if _, err := e.sim.Reply(context.Background(), whatsappsim.Reply{PhoneNumberID: pnid, From: from, Text: "hello", Timestamp: ts}); err != nil {
		t.Fatalf("reply: %v", err)
	}
}

func TestSessionMessagesInsideTheWindow(t *testing.T) {
	rcv := newReceiver(t)
	e := start(t, whatsappsim.Config{Throughput: 1_000_000, Callbacks: callbackConfig(rcv.URL)}, 5*time.Second)
	e.reply(t, user, 0)

	ids := map[string]string{}
	for name, s := range sessions() {
		id, err := e.cl.SendSession(context.Background(), acct, user, s)
		if err != nil || !strings.HasPrefix(id, "wamid.") {
			t.Fatalf("%s: %q %v", name, id, err)
		}
		ids[id] = s.Type
	}
	// Each one is recorded with its type and content, and gets the same
	// statuses as a template, billed as a free service message.
	msgs := e.sim.Messages(whatsappsim.Filter{To: user})
	if len(msgs) != len(ids) {
		t.Fatalf("recorded %d, want %d", len(msgs), len(ids))
	}
	for _, m := range msgs {
		if ids[m.ID] != m.Type || m.Session == nil || m.Session.Type != m.Type || m.Template != "" || m.FailedWith != 0 {
			t.Errorf("recorded %+v", m)
		}
	}
	ups := rcv.waitFor(t, 3*len(ids)) // the inbound post carries no status
	seen := map[string]int{}
	for _, u := range ups {
		if u.Status == whatsapp.StatusFailed {
			t.Errorf("failed inside the window: %+v", u)
		}
		seen[u.MessageID]++
	}
	for id := range ids {
		if seen[id] != 3 {
			t.Errorf("%s: %d statuses, want sent, delivered, read", id, seen[id])
		}
	}
	rcv.mu.Lock()
	var all []string
	for _, b := range rcv.raw {
		all = append(all, string(b))
	}
	rcv.mu.Unlock()
	raw := strings.Join(all, "\n")
	if !strings.Contains(raw, `"category":"service"`) || strings.Contains(raw, `"category":"marketing"`) {
		t.Errorf("session statuses not billed as service: %s", raw)
	}
	if st := e.sim.Stats(); st.Sessions != int64(len(ids)) || st.Accepted != int64(len(ids)) || st.WindowClosed != 0 || st.Inbound != 1 {
		t.Errorf("stats %+v", st)
	}
	// GET /_sim/messages shows the type and the message.
	var got struct {
		Messages []map[string]any `json:"messages"`
	}
	getJSON(t, e.srv.URL+"/_sim/messages?to="+user[1:]+"&limit=1", &got)
	if len(got.Messages) != 1 || got.Messages[0]["type"] == "" || got.Messages[0]["session"] == nil {
		t.Errorf("/_sim/messages: %v", got)
	}
}

func TestSessionShapeErrors(t *testing.T) {
	e := start(t, whatsappsim.Config{Throughput: 1_000_000}, 5*time.Second)
	url := e.srv.URL + "/v21.0/" + pnid + "/messages"
	env := `{"messaging_product":"whatsapp","recipient_type":"individual","to":"14155550100",`
	tests := []struct {
		name    string
		body    string
		code    float64
		details string
	}{
		{"text without body", `"type":"text","text":{}}`, 131008, "Param text['body']: String should have at least 1 character"},
		{"text object missing", `"type":"text"}`, 131008, "Param text: Field required"},
		{"text too long", `"type":"text","text":{"body":"` + strings.Repeat("a", 4097) + `"}}`, 131009, "Param text['body']: String should have at most 4096 characters"},
		{"unknown type", `"type":"poll","poll":{}}`, 100, "Param type: Input should be 'text', 'image', 'video', 'audio', 'document', 'sticker', 'interactive' or 'reaction'"},
		{"two objects", `"type":"text","text":{"body":"a"},"image":{"link":"https://a.example/x"}}`, 100, "Param image: Extra inputs are not permitted"},
		{"http media", `"type":"image","image":{"link":"http://a.example/x.jpg"}}`, 131009, "Param image['link']: URL scheme should be 'https'"},
		{"media without link", `"type":"video","video":{}}`, 131008, "Param video['link']: Input should be a valid URL, input is empty"},
		{"caption on audio", `"type":"audio","audio":{"link":"https://a.example/x.ogg","caption":"c"}}`, 100, "Param audio['caption']: Extra inputs are not permitted"},
		{"four buttons", `"type":"interactive","interactive":{"type":"button","body":{"text":"b"},"action":{"buttons":[` +
			strings.TrimSuffix(strings.Repeat(`{"type":"reply","reply":{"id":"x","title":"X"}},`, 4), ",") + `]}}}`, 131009,
			"Param interactive['action']['buttons']: List should have at most 3 items after validation, not 4"},
		{"button title too long", `"type":"interactive","interactive":{"type":"button","body":{"text":"b"},"action":{"buttons":[{"type":"reply","reply":{"id":"x","title":"` +
			strings.Repeat("t", 21) + `"}}]}}}`, 131009, "Param interactive['action']['buttons'][0]['reply']['title']: String should have at most 20 characters"},
		{"list without sections", `"type":"interactive","interactive":{"type":"list","body":{"text":"b"},"action":{"button":"Go"}}}`, 131008,
			"Param interactive['action']['sections']: Field required"},
		{"reaction of two emoji", `"type":"reaction","reaction":{"message_id":"wamid.x","emoji":"👍👍"}}`, 131009,
			"Param reaction['emoji']: Value error, must be one emoji, or empty to remove the reaction"},
		{"wrong JSON type", `"type":"text","text":{"body":7}}`, 100, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, ans := post(t, url, env+tt.body)
			errObj, _ := ans["error"].(map[string]any)
			if status != 400 || errObj == nil || errObj["code"] != tt.code {
				t.Fatalf("got %d %v, want 400 with code %v", status, ans, tt.code)
			}
			data, _ := errObj["error_data"].(map[string]any)
			if tt.details != "" && (data == nil || data["details"] != tt.details) {
				t.Errorf("details %v, want %q", data, tt.details)
			}
		})
	}
	if st := e.sim.Stats(); st.Accepted != 0 || st.Errors["131008"] != 4 || st.Errors["131009"] != 5 || st.Errors["100"] != 4 {
		t.Errorf("stats %+v", st)
	}
}

func TestServiceWindow(t *testing.T) {
	rcv := newReceiver(t)
	e := start(t, whatsappsim.Config{Throughput: 1_000_000, Callbacks: callbackConfig(rcv.URL)}, 5*time.Second)
	text := sessions()["text"]
	failed := func(id string) whatsapp.StatusUpdate {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			ups, _ := rcv.snapshot()
			for _, u := range ups {
				if u.MessageID == id {
					return u
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("no status for %s", id)
		return whatsapp.StatusUpdate{}
	}

	// Never opened: the send is accepted, then fails by status with 131047.
	id, err := e.cl.SendSession(context.Background(), acct, user, text)
	if err != nil {
		t.Fatalf("outside the window the send itself is accepted: %v", err)
	}
	u := failed(id)
	if u.Status != whatsapp.StatusFailed || len(u.Errors) != 1 || u.Errors[0].Code != 131047 || u.Errors[0].Title != "Re-engagement message" ||
		u.Errors[0].Details != "Message failed to send because more than 24 hours have passed since the customer last replied to this number." {
		t.Errorf("status %+v", u)
	}
	if c, _ := whatsapp.ClassifyCode(0, 131047, 0); c != whatsapp.Permanent {
		t.Errorf("131047 classified %v", c)
	}
	if m := e.sim.Messages(whatsappsim.Filter{To: user}); len(m) != 1 || m[0].FailedWith != 131047 {
		t.Errorf("recorded %+v", m)
	}
	// A template needs no window.
	if _, err := e.send(whatsapp.Recipient{Phone: user}); err != nil {
		t.Fatalf("template outside the window: %v", err)
	}

	// A reply 25 hours old opens a window that is already closed.
	old := time.Now().Add(-25 * time.Hour).Unix()
	e.reply(t, user, old)
	if w := e.sim.Window(pnid, user); w.Open || w.LastMessage == nil || w.LastMessage.Unix() != old {
		t.Errorf("window after an old reply: %+v", w)
	}
	id, _ = e.cl.SendSession(context.Background(), acct, user, text)
	if u := failed(id); u.Status != whatsapp.StatusFailed {
		t.Errorf("old reply: %+v", u)
	}
	// A reply now opens it; an older one played later does not shorten it.
	e.reply(t, user, 0)
	e.reply(t, user, old)
	var w whatsappsim.Window
	getJSON(t, e.srv.URL+"/_sim/windows/"+pnid+"/"+user, &w)
	if !w.Open || w.ExpiresAt == nil || time.Until(*w.ExpiresAt) < 23*time.Hour || w.User != user[1:] {
		t.Errorf("window after a reply: %+v", w)
	}
	id, _ = e.cl.SendSession(context.Background(), acct, user, text)
	if u := failed(id); u.Status != whatsapp.StatusSent {
		t.Errorf("inside the window: %+v", u)
	}
	// The window is per business number.
	if err := e.sim.SetAccount(whatsappsim.Account{PhoneNumberID: "2002", Token: "t2"}); err != nil {
		t.Fatal(err)
	}
	id, _ = e.cl.SendSession(context.Background(), whatsapp.Account{PhoneNumberID: "2002", AccessToken: "t2"}, user, text)
	if u := failed(id); u.Status != whatsapp.StatusFailed {
		t.Errorf("another number's window: %+v", u)
	}

	// sync: the send itself is answered 400 with 131047.
	if err := e.sim.SetRules(whatsappsim.Rules{ServiceWindow: 24 * time.Hour, EnforceServiceWindow: true, ServiceWindowError: whatsappsim.WindowErrorSync}); err != nil {
		t.Fatal(err)
	}
	_, err = e.cl.SendSession(context.Background(), acct, "+14155550199", text)
	pe := providerError(t, err)
	if pe.HTTPStatus != 400 || pe.Code != 131047 || pe.Class != whatsapp.Permanent || pe.Title != "Re-engagement message" {
		t.Errorf("sync refusal: %+v", pe)
	}
	// A short window closes by itself.
	if err := e.sim.SetRules(whatsappsim.Rules{ServiceWindow: 2 * time.Second, EnforceServiceWindow: true, ServiceWindowError: whatsappsim.WindowErrorSync}); err != nil {
		t.Fatal(err)
	}
	e.reply(t, "+14155550101", time.Now().Add(-3*time.Second).Unix())
	if _, err := e.cl.SendSession(context.Background(), acct, "+14155550101", text); providerError(t, err).Code != 131047 {
		t.Errorf("a 3 s old reply with a 2 s window: %v", err)
	}
	// Not enforced: anything goes.
	if err := e.sim.SetRules(whatsappsim.Rules{ServiceWindow: time.Hour, EnforceServiceWindow: false, ServiceWindowError: whatsappsim.WindowErrorSync}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cl.SendSession(context.Background(), acct, "+14155550102", text); err != nil {
		t.Errorf("not enforced: %v", err)
	}
	st := e.sim.Stats()
	if st.WindowClosed != 5 || st.Errors["131047"] != 2 || st.Windows != 2 || st.Inbound != 4 {
		t.Errorf("stats %+v", st)
	}

	// Reset forgets the windows and restores the configured rules.
	e.sim.Reset()
	if w := e.sim.Window(pnid, user); w.Open || w.LastMessage != nil {
		t.Errorf("window after reset: %+v", w)
	}
	if r := e.sim.Rules(); r != whatsappsim.DefaultRules() {
		t.Errorf("rules after reset: %+v", r)
	}
}

// rulesTail is the rules past the service window at their defaults (the
// template, limit and pair rate rules: rules_test.go).
const rulesTail = `,"time_scale":1,"template_review_delay":"1s","reject_templates_matching":"","template_reject_reason":"INVALID_FORMAT","pause_on_red_quality":true,"pair_rate_interval":"0s","messaging_limit_error":"status","messaging_limit_code":131049,"marketing_limit_share":0}`

func TestRulesEndpoint(t *testing.T) {
	e := start(t, whatsappsim.Config{}, 5*time.Second)
	do := func(method, body string) (int, string) {
		req, _ := http.NewRequest(method, e.srv.URL+"/_sim/rules", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	if code, body := do("GET", ""); code != 200 || body != `{"service_window":"24h0m0s","enforce_service_window":true,"service_window_error":"status"`+rulesTail {
		t.Errorf("GET: %d %s", code, body)
	}
	if code, body := do("PATCH", `{"service_window_error":"sync","service_window":"90s"}`); code != 200 ||
		body != `{"service_window":"1m30s","enforce_service_window":true,"service_window_error":"sync"`+rulesTail {
		t.Errorf("PATCH merges: %d %s", code, body)
	}
	for _, bad := range []string{`{"service_window":"a day"}`, `{"service_window":"-1h"}`, `{"service_window_error":"later"}`, `{"window":"1h"}`, `{"enforce_service_window":"yes"}`} {
		if code, _ := do("PATCH", bad); code != 400 {
			t.Errorf("PATCH %s: %d", bad, code)
		}
	}
	if r := e.sim.Rules(); r.ServiceWindow != 90*time.Second || r.ServiceWindowError != "sync" {
		t.Errorf("a refused PATCH changed the rules: %+v", r)
	}
	if _, err := whatsappsim.New(whatsappsim.Config{Rules: &whatsappsim.Rules{ServiceWindowError: "status"}}); err == nil {
		t.Error("a zero window accepted")
	}
}

// postReply is POST /_sim/replies (or /batch) with a raw body.
func postReply(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestInboundOfEveryType(t *testing.T) {
	rcv := newReceiver(t)
	e := start(t, whatsappsim.Config{Callbacks: callbackConfig(rcv.URL)}, 5*time.Second)
	url := e.srv.URL + "/_sim/replies"
	tests := []struct {
		name    string
		message string
		check   func(whatsapp.InboundMessage) bool
	}{
		{"text", `{"type":"text","text":{"body":"Is my order shipped?"}}`,
			func(m whatsapp.InboundMessage) bool {
				return m.Text == "Is my order shipped?" && m.Content.Text.Body == m.Text
			}},
		{"button", `{"type":"button","button":{"payload":"STOP","text":"Stop promotions"}}`,
			func(m whatsapp.InboundMessage) bool {
				return m.ButtonPayload == "STOP" && m.Content.Button.Text == "Stop promotions"
			}},
		{"button_reply", `{"type":"interactive","interactive":{"type":"button_reply","button_reply":{"id":"am","title":"Morning"}}}`,
			func(m whatsapp.InboundMessage) bool {
				return m.ButtonPayload == "am" && m.Content.Interactive.Type == "button_reply"
			}},
		{"list_reply", `{"type":"interactive","interactive":{"type":"list_reply","list_reply":{"id":"x","title":"Express","description":"fast"}}}`,
			func(m whatsapp.InboundMessage) bool {
				return m.ButtonText == "Express" && m.Content.Interactive.Description == "fast"
			}},
		{"image", `{"type":"image","image":{"mime_type":"image/png","caption":"receipt"}}`,
			func(m whatsapp.InboundMessage) bool {
				i := m.Content.Image
				return i.ID != "" && len(i.SHA256) == 64 && i.MimeType == "image/png" && i.Caption == "receipt"
			}},
		{"video", `{"type":"video","video":{}}`,
			func(m whatsapp.InboundMessage) bool {
				return m.Content.Video.MimeType == "video/mp4" && m.Content.Video.ID != ""
			}},
		{"voice note", `{"type":"audio","audio":{"voice":true}}`,
			func(m whatsapp.InboundMessage) bool {
				return m.Content.Audio.Voice && m.Content.Audio.MimeType == "audio/ogg; codecs=opus"
			}},
		{"document", `{"type":"document","document":{"id":"77","sha256":"abc","filename":"a.pdf"}}`,
			func(m whatsapp.InboundMessage) bool {
				d := m.Content.Document
				return d.ID == "77" && d.SHA256 == "abc" && d.Filename == "a.pdf" && d.MimeType == "application/pdf"
			}},
		{"sticker", `{"type":"sticker","sticker":{"animated":true}}`,
			func(m whatsapp.InboundMessage) bool {
				return m.Content.Sticker.Animated && m.Content.Sticker.MimeType == "image/webp"
			}},
		{"location", `{"type":"location","location":{"latitude":45.46,"longitude":9.19,"name":"Duomo"}}`,
			func(m whatsapp.InboundMessage) bool {
				return m.Content.Location.Name == "Duomo" && m.Content.Location.Longitude == 9.19
			}},
		{"contacts", `{"type":"contacts","contacts":[{"name":{"formatted_name":"Bruno"},"phones":[{"phone":"+39 333 1"}]}]}`,
			func(m whatsapp.InboundMessage) bool { return m.Content.Summary() == "[contacts] Bruno" }},
		{"reaction", `{"type":"reaction","reaction":{"message_id":"wamid.out","emoji":"❤️"}}`,
			func(m whatsapp.InboundMessage) bool {
				return m.Content.Reaction.Emoji == "❤️" && m.Content.Reaction.MessageID == "wamid.out"
			}},
		{"reaction removed", `{"type":"reaction","reaction":{"message_id":"wamid.out"}}`,
			func(m whatsapp.InboundMessage) bool {
				return m.Content.Reaction != nil && m.Content.Reaction.Emoji == ""
			}},
		{"unsupported", `{"type":"unsupported"}`,
			func(m whatsapp.InboundMessage) bool {
				return m.Type == "unsupported" && m.Content.Unsupported.Type == "unsupported"
			}},
		{"order", `{"type":"order","order":{"catalog_id":"1","product_items":[]}}`,
			func(m whatsapp.InboundMessage) bool { return m.Content.Unsupported.Type == "order" }},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from := fmt.Sprintf("+3933300000%02d", i)
			code, body := postReply(t, url, `{"phone_number_id":"`+pnid+`","from":"`+from+`","name":"Ada","context":"wamid.biz","message":`+tt.message+`}`)
			var res whatsappsim.ReplyResult
			if err := json.Unmarshal([]byte(body), &res); code != 200 || err != nil || res.ReceiverStatus != 200 {
				t.Fatalf("%d %s", code, body)
			}
			rcv.mu.Lock()
			got := rcv.inbound[len(rcv.inbound)-1]
			rcv.mu.Unlock()
			if got.ID != res.ID || got.From != from || got.ProfileName != "Ada" || got.ContextID != "wamid.biz" || got.Timestamp.IsZero() || !tt.check(got) {
				t.Errorf("received %+v (content %+v)", got, got.Content)
			}
			if w := e.sim.Window(pnid, from); !w.Open {
				t.Errorf("window not opened: %+v", w)
			}
		})
	}
	if rcv.badSigs.Load() != 0 {
		t.Errorf("%d bad signatures", rcv.badSigs.Load())
	}

	for name, body := range map[string]string{
		"no type":                 `{"message":{"text":{"body":"x"}}}`,
		"not an object":           `{"message":"hello"}`,
		"with from":               `{"message":{"type":"text","from":"1","text":{"body":"x"}}}`,
		"with id":                 `{"message":{"type":"text","id":"wamid.x","text":{"body":"x"}}}`,
		"image without image":     `{"message":{"type":"image"}}`,
		"text without body":       `{"message":{"type":"text","text":{}}}`,
		"location without coords": `{"message":{"type":"location","location":{"name":"x"}}}`,
		"latitude out of range":   `{"message":{"type":"location","location":{"latitude":91,"longitude":0}}}`,
		"contacts not an array":   `{"message":{"type":"contacts","contacts":{}}}`,
		"reaction of text":        `{"message":{"type":"reaction","reaction":{"message_id":"w","emoji":"ok"}}}`,
		"list_reply without id":   `{"message":{"type":"interactive","interactive":{"type":"list_reply","list_reply":{"title":"x"}}}}`,
		"message and text":        `{"text":"hi","message":{"type":"text","text":{"body":"x"}}}`,
		"two contexts":            `{"context":"wamid.a","message":{"type":"text","text":{"body":"x"},"context":{"id":"wamid.b"}}}`,
		"wrong shape":             `{"message":{"type":"text","text":{"body":7}}}`,
	} {
		body = `{"phone_number_id":"` + pnid + `","from":"+393330000099",` + strings.TrimPrefix(body, "{")
		if code, ans := postReply(t, url, body); code != 400 {
			t.Errorf("%s: %d %s", name, code, ans)
		}
	}
}

func TestReplayedAndBatchedReplies(t *testing.T) {
	rcv := newReceiver(t)
	e := start(t, whatsappsim.Config{Callbacks: callbackConfig(rcv.URL)}, 5*time.Second)
	// A given id plays the same message again, as Meta repeats webhooks.
	for range 2 {
		res, err := e.sim.Reply(context.Background(), whatsappsim.Reply{PhoneNumberID: pnid, From: user, Text: "again", ID: "wamid.SAME"})
		if err != nil || res.ID != "wamid.SAME" {
			t.Fatalf("%+v %v", res, err)
		}
	}
	if err := e.sim.SetAccount(whatsappsim.Account{PhoneNumberID: "2002", Token: "t2"}); err != nil {
		t.Fatal(err)
	}
	var replies []string
	for i := range whatsappsim.MaxReplyBatch {
		number := pnid
		if i%2 == 1 {
			number = "2002"
		}
		replies = append(replies, fmt.Sprintf(`{"phone_number_id":"%s","from":"+1415556%04d","name":"U%d","message":{"type":"text","text":{"body":"m%d"}}}`, number, i%500, i, i))
	}
	code, body := postReply(t, e.srv.URL+"/_sim/replies/batch", `{"replies":[`+strings.Join(replies, ",")+`]}`)
	var res whatsappsim.BatchResult
	if err := json.Unmarshal([]byte(body), &res); code != 200 || err != nil || res.ReceiverStatus != 200 || len(res.IDs) != whatsappsim.MaxReplyBatch {
		t.Fatalf("%d %.300s", code, body)
	}
	rcv.mu.Lock()
	last := rcv.raw[len(rcv.raw)-1]
	inbound := append([]whatsapp.InboundMessage(nil), rcv.inbound...)
	posts := rcv.posts
	rcv.mu.Unlock()
	if posts != 3 || len(inbound) != 2+whatsappsim.MaxReplyBatch {
		t.Fatalf("%d posts, %d messages", posts, len(inbound))
	}
	if inbound[0].ID != "wamid.SAME" || inbound[1].ID != "wamid.SAME" {
		t.Errorf("replayed ids %s %s", inbound[0].ID, inbound[1].ID)
	}
	// One entry per number, each sender once in contacts.
	var p whatsapp.WebhookPayload
	if err := json.Unmarshal(last, &p); err != nil || len(p.Entry) != 2 {
		t.Fatalf("%v %d entries", err, len(p.Entry))
	}
	for _, en := range p.Entry {
		v := en.Changes[0].Value
		if len(v.Messages) != whatsappsim.MaxReplyBatch/2 || len(v.Contacts) != 250 || v.Metadata.PhoneNumberID != en.ID {
			t.Errorf("entry %s: %d messages, %d contacts", en.ID, len(v.Messages), len(v.Contacts))
		}
	}
	ids := map[string]bool{}
	for _, id := range res.IDs {
		ids[id] = true
	}
	for _, m := range inbound[2:] {
		if !ids[m.ID] {
			t.Fatalf("received %s, not one of the answered ids", m.ID)
		}
		delete(ids, m.ID)
	}
	if len(ids) != 0 {
		t.Errorf("%d ids answered but not received (or not distinct)", len(ids))
	}
	if st := e.sim.Stats(); st.Inbound != 2+whatsappsim.MaxReplyBatch || st.Windows != 1+500 {
		t.Errorf("stats: inbound %d, windows %d", st.Inbound, st.Windows)
	}
	// Too many, none, or one bad: nothing is posted.
	tooMany := `{"replies":[` + strings.Join(append(replies, replies[0]), ",") + `]}`
	for name, b := range map[string]string{
		"too many": tooMany,
		"none":     `{"replies":[]}`,
		"one bad":  `{"replies":[` + replies[0] + `,{"phone_number_id":"` + pnid + `","from":"x","text":"y"}]}`,
	} {
		if code, ans := postReply(t, e.srv.URL+"/_sim/replies/batch", b); code != 400 {
			t.Errorf("%s: %d %.200s", name, code, ans)
		}
	}
	if code, _ := postReply(t, e.srv.URL+"/_sim/replies/batch", `{"replies":[{"phone_number_id":"9","from":"+14155550000","text":"y"}]}`); code != 404 {
		t.Errorf("unknown number: %d", code)
	}
	rcv.mu.Lock()
	if rcv.posts != 3 {
		t.Errorf("a refused batch was posted")
	}
	rcv.mu.Unlock()
	// With callbacks off there is no one to post to.
	if err := e.sim.SetCallbacks(whatsappsim.CallbackSettings{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sim.Reply(context.Background(), whatsappsim.Reply{PhoneNumberID: pnid, From: user, Text: "x"}); !errors.Is(err, whatsappsim.ErrCallbacksOff) {
		t.Errorf("callbacks off: %v", err)
	}
}
