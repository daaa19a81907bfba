package whatsappsim_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
)

const waba = "5005"

// hooks is a webhook receiver that reads both kinds of webhook: the
// account changes (templates, messaging limit) and the statuses. Every
// body must carry a valid signature.
type hooks struct {
	*httptest.Server
	mu       sync.Mutex
	changes  []accountChange
	statuses []whatsapp.StatusUpdate
	raw      [][]byte
	badSigs  atomic.Int64
	// only, when set, is the WABA whose changes of and wait count (a
	// template registered for every account is announced to each).
	only string
}

type accountChange struct {
	waba, field string
	time        int64
	value       json.RawMessage
}

func newHooks(t *testing.T) *hooks {
	t.Helper()
	h := &hooks{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if !whatsapp.VerifySignature(appSecret, body, req.Header.Get(whatsapp.SignatureHeader)) {
			h.badSigs.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var p whatsapp.AccountWebhook
		if err := json.Unmarshal(body, &p); err != nil || p.Object != whatsapp.WebhookObject || len(p.Entry) == 0 {
			t.Errorf("webhook shape: %v %s", err, body)
		}
		wh, err := whatsapp.ParseWebhook(body)
		if err != nil || wh.Malformed != 0 {
			t.Errorf("ParseWebhook: %v, %d malformed", err, wh.Malformed)
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		h.raw = append(h.raw, body)
		h.statuses = append(h.statuses, wh.Statuses...)
		for _, e := range p.Entry {
			for _, c := range e.Changes {
				if c.Field == "messages" {
					continue
				}
				if e.ID == "" || e.Time <= 0 {
					t.Errorf("entry without id or time: %s", body)
				}
				h.changes = append(h.changes, accountChange{waba: e.ID, field: c.Field, time: e.Time, value: c.Value})
			}
		}
	}))
	t.Cleanup(h.Close)
	return h
}

// of returns the changes of a field so far (of the only WABA, if set).
func (h *hooks) of(field string) []accountChange {
	var out []accountChange
	for _, c := range h.all(field) {
		if h.only == "" || c.waba == h.only {
			out = append(out, c)
		}
	}
	return out
}

// all returns the changes of a field so far, for every WABA.
func (h *hooks) all(field string) []accountChange {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []accountChange
	for _, c := range h.changes {
		if c.field == field {
			out = append(out, c)
		}
	}
	return out
}

// wait polls until n changes of field arrived.
func (h *hooks) wait(t *testing.T, field string, n int) []accountChange {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := h.of(field)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d %s webhooks arrived, want %d", len(got), field, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// statusEvents decodes the message_template_status_update values so far.
func (h *hooks) statusEvents(t *testing.T, n int) []whatsapp.TemplateStatusUpdate {
	t.Helper()
	var out []whatsapp.TemplateStatusUpdate
	for _, c := range h.wait(t, whatsapp.FieldTemplateStatus, n) {
		var v whatsapp.TemplateStatusUpdate
		if err := json.Unmarshal(c.value, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func (h *hooks) failedWith(wamid string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, u := range h.statuses {
		if u.MessageID == wamid && u.Status == whatsapp.StatusFailed && len(u.Errors) > 0 {
			return u.Errors[0].Code
		}
	}
	return 0
}

// call is one HTTP request to the simulator with an optional Bearer token.
func call(t *testing.T, method, url, bearer, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// orderUpdate is a definition of the shape tpl sends: an image header, a
// body with two variables, a dynamic URL button.
const orderUpdate = `{"name":"order_update","language":"en_US","category":"UTILITY","components":[
 {"type":"HEADER","format":"IMAGE","example":{"header_handle":["https://cdn.example/h.jpg"]}},
 {"type":"BODY","text":"Hi {{1}}, order {{2}} is on its way.","example":{"body_text":[["Ann","A1"]]}},
 {"type":"FOOTER","text":"Reply STOP to opt out"},
 {"type":"BUTTONS","buttons":[{"type":"URL","text":"Track","url":"https://shop.example/{{1}}"},{"type":"QUICK_REPLY","text":"Thanks"}]}]}`

func lifecycleEnv(t *testing.T, rules whatsappsim.Rules) (*env, *hooks) {
	t.Helper()
	h := newHooks(t)
	e := start(t, whatsappsim.Config{
		Throughput: 1_000_000,
		Accounts:   []whatsappsim.Account{{PhoneNumberID: pnid, Token: token, WABAID: waba}, {PhoneNumberID: "2002", Token: "other-token"}},
		Callbacks:  callbackConfig(h.URL),
		Rules:      &rules,
	}, 5*time.Second)
	h.only = waba
	return e, h
}

func TestTemplateCreatedPendingThenApproved(t *testing.T) {
	rules := whatsappsim.DefaultRules()
	rules.TemplateReviewDelay = 300 * time.Millisecond
	e, h := lifecycleEnv(t, rules)
	url := e.srv.URL + "/v21.0/" + waba + "/message_templates"

	code, body := call(t, "POST", url, token, orderUpdate)
	var created whatsapp.TemplateCreated
	if err := json.Unmarshal([]byte(body), &created); err != nil || code != 200 || created.ID == "" ||
		created.Status != whatsapp.TemplatePending || created.Category != whatsapp.CategoryUtility {
		t.Fatalf("create: %d %s", code, body)
	}
	// PENDING is not sendable: Meta answers as for a template not there.
	if pe := providerError(t, sendErr(e, tpl)); pe.Code != 132001 {
		t.Errorf("send of a PENDING template: %+v", pe)
	}
	ev := h.statusEvents(t, 1)
	id, _ := strconv.ParseInt(created.ID, 10, 64)
	if got := ev[0]; got.Event != whatsapp.TemplateApproved || got.MessageTemplateID != id || got.MessageTemplateName != "order_update" ||
		got.MessageTemplateLanguage != "en_US" || got.Reason != "NONE" || got.MessageTemplateCategory != whatsapp.CategoryUtility {
		t.Errorf("status webhook = %+v", got)
	}
	if c := h.of(whatsapp.FieldTemplateStatus)[0]; c.waba != waba {
		t.Errorf("entry id %s, want the WABA %s", c.waba, waba)
	}
	// The webhook's value is Meta's shape: the id is a number.
	if raw := string(h.of(whatsapp.FieldTemplateStatus)[0].value); !strings.Contains(raw, `"message_template_id":`+created.ID+",") {
		t.Errorf("value %s", raw)
	}

	wamid, err := e.send(recipient(1))
	if err != nil {
		t.Fatalf("send of the APPROVED template: %v", err)
	}
	// Sends are held against the definition, and billed in its category.
	short := tpl
	short.BodyParameters = tpl.BodyParameters[:1]
	if pe := providerError(t, sendErr(e, short)); pe.Code != 132000 {
		t.Errorf("one body parameter short: %+v", pe)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(h.rawWith(wamid), `"category":"utility"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no status billed as utility: %s", h.rawWith(wamid))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Another account's number does not have it (its WABA has no such
	// template), but the PUT kind is every account's.
	other := whatsapp.Account{PhoneNumberID: "2002", AccessToken: "other-token"}
	if _, err := e.cl.SendTemplate(context.Background(), other, tpl, recipient(2), whatsapp.Overrides{}); providerError(t, err).Code != 132001 {
		t.Errorf("another WABA's number sent it: %v", err)
	}

	st, ok := e.sim.TemplateByID(created.ID)
	if !ok || st.Status != whatsapp.TemplateApproved || st.Source != whatsappsim.SourceGraph || st.WABAID != waba ||
		st.Header != whatsapp.HeaderImage || st.BodyParameters != 2 || st.URLButtons != 1 || st.Quality != whatsapp.QualityUnknown {
		t.Errorf("state = %+v", st)
	}
	if h.badSigs.Load() != 0 {
		t.Errorf("%d webhooks with a bad signature", h.badSigs.Load())
	}
}

// rawWith is the webhook bodies that mention s.
func (h *hooks) rawWith(s string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, r := range h.raw {
		if strings.Contains(string(r), s) {
			b.Write(r)
		}
	}
	return b.String()
}

func sendErr(e *env, tp whatsapp.Template) error {
	_, err := e.cl.SendTemplate(context.Background(), acct, tp, recipient(1), whatsapp.Overrides{})
	return err
}

func TestTemplateCreationRefusals(t *testing.T) {
	e, _ := lifecycleEnv(t, whatsappsim.DefaultRules())
	url := e.srv.URL + "/v21.0/" + waba + "/message_templates"
	if code, body := call(t, "POST", url, token, orderUpdate); code != 200 {
		t.Fatalf("create: %d %s", code, body)
	}
	withBody := func(f func(m map[string]any)) string {
		var m map[string]any
		_ = json.Unmarshal([]byte(orderUpdate), &m)
		m["name"] = "another"
		f(m)
		b, _ := json.Marshal(m)
		return string(b)
	}
	for _, c := range []struct {
		name, url, token, body string
		status, code, subcode  int
	}{
		{"the token of another account", url, "other-token", withBody(func(map[string]any) {}), 401, 190, 0},
		{"no token", url, "", withBody(func(map[string]any) {}), 401, 190, 0},
		{"an unknown WABA", e.srv.URL + "/v21.0/9999/message_templates", token, withBody(func(map[string]any) {}), 400, 100, 33},
		{"the same name and language", url, token, orderUpdate, 400, 100, 2388024},
		{"no category", url, token, withBody(func(m map[string]any) { delete(m, "category") }), 400, 100, 0},
		{"a category that is none", url, token, withBody(func(m map[string]any) { m["category"] = "PROMO" }), 400, 100, 0},
		{"an upper-case name", url, token, withBody(func(m map[string]any) { m["name"] = "Order" }), 400, 100, 0},
		{"no body", url, token, withBody(func(m map[string]any) { m["components"] = []any{map[string]any{"type": "FOOTER", "text": "x"}} }), 400, 100, 0},
		{"variables out of order", url, token, withBody(func(m map[string]any) {
			m["components"] = []any{map[string]any{"type": "BODY", "text": "{{2}} and {{1}}"}}
		}), 400, 100, 0},
		{"a document header", url, token, withBody(func(m map[string]any) {
			m["components"] = []any{map[string]any{"type": "HEADER", "format": "DOCUMENT"}, map[string]any{"type": "BODY", "text": "x"}}
		}), 400, 100, 0},
		{"no version", e.srv.URL + "/21/" + waba + "/message_templates", token, withBody(func(map[string]any) {}), 400, 100, 0},
	} {
		status, body := call(t, "POST", c.url, c.token, c.body)
		var we struct {
			Error struct {
				Code    int `json:"code"`
				Subcode int `json:"error_subcode"`
			} `json:"error"`
		}
		_ = json.Unmarshal([]byte(body), &we)
		if status != c.status || we.Error.Code != c.code || we.Error.Subcode != c.subcode {
			t.Errorf("%s: %d %s, want %d code %d/%d", c.name, status, body, c.status, c.code, c.subcode)
		}
	}
	// A number's WABA and portfolio are set with the account.
	for body, status := range map[string]int{
		`{"token":"t4","waba_id":"abc"}`:                                400,
		`{"token":"t4","portfolio_id":"a b"}`:                           400,
		`{"token":"t4","waba_id":"` + waba + `","portfolio_id":"acme"}`: 200,
	} {
		if code, out := call(t, "PUT", e.srv.URL+"/_sim/accounts/4004", "", body); code != status {
			t.Errorf("PUT account %s: %d %s", body, code, out)
		}
	}
	if code, _ := call(t, "GET", e.srv.URL+"/v21.0/"+waba+"/message_templates", "t4", ""); code != 200 {
		t.Errorf("the token of another number of the WABA: %d", code)
	}
	// Template management is not a send: its refusals stay out of the
	// send statistics.
	if st := e.sim.Stats(); st.Requests != 0 || len(st.Errors) != 0 {
		t.Errorf("stats = %+v", st)
	}
}

func TestTemplateRejectedByRuleOrByReview(t *testing.T) {
	rules := whatsappsim.DefaultRules()
	rules.TemplateReviewDelay = time.Hour // decided by the admin endpoint below
	e, h := lifecycleEnv(t, rules)
	if code, body := call(t, "PATCH", e.srv.URL+"/_sim/rules", "", `{"reject_templates_matching":"^promo_","template_reject_reason":"INCORRECT_CATEGORY","template_review_delay":"10ms"}`); code != 200 ||
		!strings.Contains(body, `"reject_templates_matching":"^promo_"`) {
		t.Fatalf("PATCH rules: %d %s", code, body)
	}
	if code, _ := call(t, "PATCH", e.srv.URL+"/_sim/rules", "", `{"reject_templates_matching":"("}`); code != 400 {
		t.Errorf("a bad expression: %d", code)
	}
	def := func(name string) whatsapp.TemplateDefinition {
		return whatsapp.TemplateDefinition{Name: name, Language: "en", Category: whatsapp.CategoryMarketing,
			Components: []whatsapp.TemplateComponent{{Type: "BODY", Text: "Sale! {{1}}"}}}
	}
	promo, err := e.sim.CreateTemplate(waba, def("promo_summer"))
	if err != nil {
		t.Fatal(err)
	}
	ev := h.statusEvents(t, 1)
	if ev[0].Event != whatsapp.TemplateRejected || ev[0].Reason != "INCORRECT_CATEGORY" || ev[0].MessageTemplateName != "promo_summer" {
		t.Errorf("rejection webhook = %+v", ev[0])
	}
	var list []whatsappsim.TemplateState
	getJSON(t, e.srv.URL+"/_sim/templates", &list)
	if len(list) != 1 || list[0].ID != promo.ID || list[0].Status != whatsapp.TemplateRejected || list[0].Reason != "INCORRECT_CATEGORY" {
		t.Errorf("GET /_sim/templates = %+v", list)
	}

	// A PENDING template decided at once through the admin endpoint.
	if code, _ := call(t, "PATCH", e.srv.URL+"/_sim/rules", "", `{"template_review_delay":"1h"}`); code != 200 {
		t.Fatal("PATCH rules")
	}
	later, err := e.sim.CreateTemplate(waba, def("weekly_digest"))
	if err != nil {
		t.Fatal(err)
	}
	if code, body := call(t, "POST", e.srv.URL+"/_sim/templates/"+later.ID+"/review", "", `{"status":"REJECTED","reason":"SCAM"}`); code != 200 ||
		!strings.Contains(body, `"status":"REJECTED"`) || !strings.Contains(body, `"reason":"SCAM"`) {
		t.Errorf("review: %d %s", code, body)
	}
	if ev := h.statusEvents(t, 2); ev[1].Event != whatsapp.TemplateRejected || ev[1].Reason != "SCAM" {
		t.Errorf("review webhook = %+v", ev[1])
	}
	for _, c := range []struct {
		path, body string
		status     int
	}{
		{"/_sim/templates/" + later.ID + "/review", `{"status":"APPROVED"}`, 409}, // no longer PENDING
		{"/_sim/templates/" + later.ID + "/review", `{"status":"PAUSED"}`, 400},
		{"/_sim/templates/123/review", `{"status":"APPROVED"}`, 404},
		{"/_sim/templates/" + later.ID + "/pause", ``, 409}, // REJECTED is never paused
	} {
		if code, body := call(t, "POST", e.srv.URL+c.path, "", c.body); code != c.status {
			t.Errorf("POST %s %s: %d %s, want %d", c.path, c.body, code, body, c.status)
		}
	}
}

func TestTemplateListInGraphPages(t *testing.T) {
	rules := whatsappsim.DefaultRules()
	rules.TemplateReviewDelay = 0
	e, _ := lifecycleEnv(t, rules)
	for _, name := range []string{"alpha", "beta", "gamma", "delta"} {
		if _, err := e.sim.CreateTemplate(waba, whatsapp.TemplateDefinition{Name: name, Language: "en_US", Category: whatsapp.CategoryUtility,
			Components: []whatsapp.TemplateComponent{{Type: "BODY", Text: "Hello {{1}}"}}}); err != nil {
			t.Fatal(err)
		}
	}
	// Registered the old way: every account's, APPROVED.
	if err := e.sim.SetTemplate(whatsappsim.TemplateSpec{Name: "legacy", Language: "en_US", BodyParameters: 1}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, st := range e.sim.TemplateStates() {
		for st.Status == whatsapp.TemplatePending && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
			st, _ = e.sim.TemplateByID(st.ID)
		}
	}

	var names []string
	next := e.srv.URL + "/v21.0/" + waba + "/message_templates?limit=2"
	for pages := 0; next != ""; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		code, body := call(t, "GET", next, token, "")
		var page whatsapp.TemplateList
		if err := json.Unmarshal([]byte(body), &page); err != nil || code != 200 || len(page.Data) == 0 || page.Paging == nil ||
			page.Paging.Cursors.Before == "" || page.Paging.Cursors.After == "" {
			t.Fatalf("page: %d %s", code, body)
		}
		if pages > 0 && page.Paging.Previous == "" {
			t.Errorf("page %d has no previous link", pages)
		}
		for _, m := range page.Data {
			if m.Status != whatsapp.TemplateApproved || len(m.Components) == 0 || m.QualityScore == nil || m.QualityScore.Score != whatsapp.QualityUnknown {
				t.Errorf("listed %+v", m)
			}
			names = append(names, m.Name)
		}
		next = page.Paging.Next
	}
	if got := strings.Join(names, ","); got != "legacy,delta,gamma,beta,alpha" {
		t.Errorf("listed %s, want the newest first", got)
	}

	var page whatsapp.TemplateList
	code, body := call(t, "GET", e.srv.URL+"/v21.0/"+waba+"/message_templates?name=ta&status=APPROVED", token, "")
	if err := json.Unmarshal([]byte(body), &page); err != nil || code != 200 || len(page.Data) != 2 || page.Data[0].Name != "delta" || page.Data[1].Name != "beta" {
		t.Errorf("filtered by name: %d %s", code, body)
	}
	code, body = call(t, "GET", e.srv.URL+"/v21.0/"+waba+"/message_templates?status=REJECTED", token, "")
	if code != 200 || body != `{"data":[]}` {
		t.Errorf("filtered by status: %d %s", code, body)
	}
	if code, _ := call(t, "GET", e.srv.URL+"/v21.0/"+waba+"/message_templates?after=@@", token, ""); code != 400 {
		t.Errorf("a bad cursor: %d", code)
	}
	if code, _ := call(t, "GET", e.srv.URL+"/v21.0/"+waba+"/message_templates", "other-token", ""); code != 401 {
		t.Errorf("another account's token: %d", code)
	}
}

func TestTemplatePausesEscalateThenDisable(t *testing.T) {
	rules := whatsappsim.DefaultRules()
	rules.TimeScale = 0.00005 // 3 h is 540 ms, 6 h 1.08 s
	e, h := lifecycleEnv(t, rules)
	if err := e.sim.SetTemplate(whatsappsim.TemplateSpec{Name: "order_update", Language: "en_US", Header: whatsapp.HeaderImage, BodyParameters: 2, URLButtons: 1}); err != nil {
		t.Fatal(err)
	}
	st, ok := e.sim.FindTemplate(waba, "order_update", "en_US")
	if !ok || st.Status != whatsapp.TemplateApproved || st.Category != whatsapp.CategoryMarketing || st.Source != whatsappsim.SourceAdmin {
		t.Fatalf("a PUT template counts as APPROVED: %+v", st)
	}
	admin := func(action, body string) whatsappsim.TemplateState {
		t.Helper()
		code, out := call(t, "POST", e.srv.URL+"/_sim/templates/"+st.ID+"/"+action, "", body)
		var got whatsappsim.TemplateState
		if err := json.Unmarshal([]byte(out), &got); err != nil || code != 200 {
			t.Fatalf("%s: %d %s", action, code, out)
		}
		return got
	}

	// First pause: 3 hours (scaled), 132015 meanwhile, APPROVED again by itself.
	began := time.Now()
	paused := admin("pause", "")
	if paused.Status != whatsapp.TemplatePaused || paused.PauseCount != 1 || paused.PausedUntil == nil ||
		paused.PausedUntil.Sub(began) < 500*time.Millisecond || paused.PausedUntil.Sub(began) > 700*time.Millisecond {
		t.Errorf("first pause: %+v", paused)
	}
	pe := providerError(t, sendErr(e, tpl))
	if pe.HTTPStatus != 400 || pe.Code != 132015 || !strings.Contains(pe.Error(), "paused due to low quality") {
		t.Errorf("send while paused: %+v", pe)
	}
	ev := h.statusEvents(t, 2) // PAUSED, then APPROVED when the pause ends
	if ev[0].Event != whatsapp.TemplatePaused || ev[0].OtherInfo == nil || ev[0].OtherInfo.Title != "FIRST_PAUSE" {
		t.Errorf("pause webhook = %+v", ev[0])
	}
	if ev[1].Event != whatsapp.TemplateApproved || ev[1].OtherInfo == nil || ev[1].OtherInfo.Title != "UNPAUSE" {
		t.Errorf("end of pause webhook = %+v", ev[1])
	}
	if d := time.Since(began); d < 500*time.Millisecond {
		t.Errorf("the pause ended after %v, want about 540ms", d)
	}
	if err := sendErr(e, tpl); err != nil {
		t.Fatalf("send after the pause: %v", err)
	}

	// Quality RED pauses it again (the rule's default), 6 hours this time;
	// the admin endpoint ends it at once.
	red := admin("quality", `{"quality":"RED"}`)
	if red.Status != whatsapp.TemplatePaused || red.PauseCount != 2 || red.Quality != whatsapp.QualityRed ||
		time.Until(*red.PausedUntil) < 900*time.Millisecond {
		t.Errorf("RED: %+v", red)
	}
	q := h.wait(t, whatsapp.FieldTemplateQuality, 1)
	var qv whatsapp.TemplateQualityUpdate
	_ = json.Unmarshal(q[0].value, &qv)
	if qv.PreviousQualityScore != whatsapp.QualityUnknown || qv.NewQualityScore != whatsapp.QualityRed || qv.MessageTemplateName != "order_update" {
		t.Errorf("quality webhook = %+v", qv)
	}
	if ev := h.statusEvents(t, 3); ev[2].Event != whatsapp.TemplatePaused || ev[2].OtherInfo.Title != "SECOND_PAUSE" {
		t.Errorf("second pause webhook = %+v", ev[2])
	}
	if got := admin("unpause", ""); got.Status != whatsapp.TemplateApproved || got.PausedUntil != nil || got.PauseCount != 2 {
		t.Errorf("unpause: %+v", got)
	}
	if ev := h.statusEvents(t, 4); ev[3].Event != whatsapp.TemplateApproved {
		t.Errorf("unpause webhook = %+v", ev[3])
	}
	if err := sendErr(e, tpl); err != nil {
		t.Fatalf("send after the unpause: %v", err)
	}

	// The third pause disables: 132016 for good.
	if got := admin("pause", ""); got.Status != whatsapp.TemplateDisabled || got.PauseCount != 3 {
		t.Errorf("third pause: %+v", got)
	}
	ev = h.statusEvents(t, 5)
	if ev[4].Event != whatsapp.TemplateDisabled || ev[4].DisableInfo == nil || ev[4].DisableInfo.DisableDate == 0 {
		t.Errorf("disable webhook = %+v", ev[4])
	}
	if pe := providerError(t, sendErr(e, tpl)); pe.HTTPStatus != 400 || pe.Code != 132016 || !strings.Contains(pe.Error(), "permanently disabled") {
		t.Errorf("send of a disabled template: %+v", pe)
	}
	for _, action := range []string{"pause", "unpause"} {
		if code, _ := call(t, "POST", e.srv.URL+"/_sim/templates/"+st.ID+"/"+action, "", ""); code != 409 {
			t.Errorf("%s a disabled template: %d", action, code)
		}
	}
	// An unknown template keeps today's answer.
	other := tpl
	other.Name = "nope"
	if pe := providerError(t, sendErr(e, other)); pe.Code != 132001 {
		t.Errorf("unknown template: %+v", pe)
	}
	if s := e.sim.Stats(); s.Errors["132015"] != 1 || s.Errors["132016"] != 1 {
		t.Errorf("errors = %v", s.Errors)
	}
	// Templates and their lifecycle are set-up: a reset keeps them.
	e.sim.Reset()
	if got, _ := e.sim.TemplateByID(st.ID); got.Status != whatsapp.TemplateDisabled || got.PauseCount != 3 {
		t.Errorf("after a reset: %+v", got)
	}
}

func TestTemplateQualityAndCategory(t *testing.T) {
	rules := whatsappsim.DefaultRules()
	rules.PauseOnRedQuality = false
	e, h := lifecycleEnv(t, rules)
	if err := e.sim.SetTemplate(whatsappsim.TemplateSpec{Name: "receipt", Language: "en_US", Category: whatsapp.CategoryUtility}); err != nil {
		t.Fatal(err)
	}
	st, _ := e.sim.FindTemplate(waba, "receipt", "en_US")

	got, err := e.sim.SetTemplateCategory(st.ID, whatsapp.CategoryMarketing)
	if err != nil || got.Category != whatsapp.CategoryMarketing {
		t.Fatalf("re-categorise: %+v %v", got, err)
	}
	c := h.wait(t, whatsapp.FieldTemplateCategory, 1)
	var cv whatsapp.TemplateCategoryUpdate
	_ = json.Unmarshal(c[0].value, &cv)
	if cv.PreviousCategory != whatsapp.CategoryUtility || cv.NewCategory != whatsapp.CategoryMarketing || cv.MessageTemplateName != "receipt" || c[0].waba != waba {
		t.Errorf("category webhook = %+v (entry %s)", cv, c[0].waba)
	}
	// A PUT template belongs to every account: each WABA hears of it.
	if c := h.all(whatsapp.FieldTemplateCategory); len(c) != 2 || c[0].waba != "2002" || c[1].waba != waba {
		t.Errorf("category webhooks %+v, want one per WABA", c)
	}

	for _, step := range []string{whatsapp.QualityYellow, whatsapp.QualityYellow, whatsapp.QualityRed} {
		if code, body := call(t, "POST", e.srv.URL+"/_sim/templates/"+st.ID+"/quality", "", `{"quality":"`+step+`"}`); code != 200 || !strings.Contains(body, `"status":"APPROVED"`) {
			t.Errorf("quality %s: %d %s", step, code, body)
		}
	}
	// YELLOW twice is one change; RED without the rule does not pause.
	h.wait(t, whatsapp.FieldTemplateQuality, 2)
	time.Sleep(50 * time.Millisecond)
	if q := h.all(whatsapp.FieldTemplateQuality); len(q) != 4 {
		t.Errorf("%d quality webhooks, want 2 changes x 2 WABAs", len(q))
	}
	if len(h.of(whatsapp.FieldTemplateStatus)) != 0 {
		t.Error("RED paused the template although the rule is off")
	}
	for _, c := range []struct {
		path, body string
		status     int
	}{
		{"/_sim/templates/" + st.ID + "/quality", `{"quality":"BLUE"}`, 400},
		{"/_sim/templates/" + st.ID + "/category", `{"category":"PROMO"}`, 400},
		{"/_sim/templates/" + st.ID + "/category", `{"categ":"UTILITY"}`, 400},
		{"/_sim/templates/404/quality", `{"quality":"RED"}`, 404},
		{"/_sim/templates/404/unpause", ``, 404},
	} {
		if code, body := call(t, "POST", e.srv.URL+c.path, "", c.body); code != c.status {
			t.Errorf("POST %s %s: %d %s, want %d", c.path, c.body, code, body, c.status)
		}
	}
	if code, _ := call(t, "DELETE", e.srv.URL+"/_sim/templates/"+st.ID, "", ""); code != 204 {
		t.Errorf("DELETE by id: %d", code)
	}
	if len(e.sim.TemplateStates()) != 0 {
		t.Error("the template is still there")
	}
}
