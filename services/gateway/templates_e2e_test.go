package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/waba"
	"github.com/parleyhq/parley/testkit/storetest"
)

// simAdmin calls provider-sim's admin API as an operator would.
func (s *stack) simAdmin(method, path, body string) map[string]any {
	s.t.Helper()
	req, err := http.NewRequest(method, s.simURL+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	if res.StatusCode != http.StatusOK {
		s.t.Fatalf("%s %s: %d %v", method, path, res.StatusCode, out)
	}
	return out
}

// waitTemplate reads the company's template until cond holds.
func (s *stack) waitTemplate(companyID, id int64, what string, cond func(catalog.Template) bool) catalog.Template {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		t, err := s.cat.CompanyTemplate(context.Background(), companyID, id)
		if err != nil {
			s.t.Fatal(err)
		}
		if cond(t) {
			return t
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("template %d never %s: %+v", id, what, t.TemplateState)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTemplateWebhooksEndToEnd: a template created through Parley is
// reviewed, paused and unpaused at provider-sim through its admin API; the
// signed webhooks reach the real gateway, which records each status (with
// the pause's end and reason, and template.status_changed events), the
// quality, and the portfolio's tier.
func TestTemplateWebhooksEndToEnd(t *testing.T) {
	s := newStack(t)
	tn := s.serve("acme")
	storetest.Subscribe(t, s.pool, tn.company.ID) // its template changes write their events
	ctx := context.Background()
	client, err := whatsapp.NewClient(whatsapp.Config{BaseURL: s.simURL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	s.simAdmin(http.MethodPatch, "/_sim/rules", `{"template_review_delay":"1h","time_scale":0.001}`)
	deps := waba.Deps{Pool: s.pool, Catalog: s.cat, Provider: client, Log: zaptest.NewLogger(t)}
	tpl, err := waba.Submit(ctx, deps, waba.NewTemplate{CompanyID: tn.company.ID, MessagingAccountID: tn.account.ID,
		Definition: whatsapp.TemplateDefinition{Name: "spring_sale", Language: "en_US", Category: "MARKETING",
			Components: []whatsapp.TemplateComponent{{Type: "BODY", Text: "Hi {{1}}, 20% off this week."}}},
		BodyParameters: []whatsapp.Binding{{Source: "first_name", Default: "there"}}})
	if err != nil {
		t.Fatal(err)
	}
	id := tpl.ProviderTemplateID

	s.simAdmin(http.MethodPost, "/_sim/templates/"+id+"/review", `{"status":"APPROVED"}`)
	s.waitTemplate(tn.company.ID, tpl.ID, "approved", func(t catalog.Template) bool { return t.Status == "APPROVED" })
	paused := s.simAdmin(http.MethodPost, "/_sim/templates/"+id+"/pause", `{}`)
	until, err := time.Parse(time.RFC3339Nano, paused["paused_until"].(string))
	if err != nil {
		t.Fatal(err)
	}
	got := s.waitTemplate(tn.company.ID, tpl.ID, "paused", func(t catalog.Template) bool { return t.Status == "PAUSED" })
	if got.StatusReason != "FIRST_PAUSE" || got.PauseCount != 1 || got.PausedUntil == nil || !got.PausedUntil.Equal(until.Truncate(time.Second)) {
		t.Fatalf("paused %+v, the provider says until %v", got.TemplateState, until)
	}
	s.simAdmin(http.MethodPost, "/_sim/templates/"+id+"/quality", `{"quality":"YELLOW"}`)
	s.simAdmin(http.MethodPost, "/_sim/templates/"+id+"/unpause", `{}`)
	s.waitTemplate(tn.company.ID, tpl.ID, "unpaused", func(t catalog.Template) bool {
		return t.Status == "APPROVED" && t.Quality == "YELLOW" && t.PausedUntil == nil
	})
	var events []string
	rows, err := s.pool.Query(ctx, `SELECT data->>'status' FROM event_outbox WHERE company_id = $1 AND type = 'template.status_changed' ORDER BY seq`, tn.company.ID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var st string
		if err := rows.Scan(&st); err != nil {
			t.Fatal(err)
		}
		events = append(events, st)
	}
	if rows.Err() != nil || strings.Join(events, ",") != "APPROVED,PAUSED,APPROVED" {
		t.Fatalf("template.status_changed events %v (%v)", events, rows.Err())
	}

	s.simAdmin(http.MethodPut, "/_sim/portfolios/"+tn.account.PhoneNumberID, `{"tier":"TIER_250"}`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ps, err := s.cat.Portfolios(ctx, tn.company.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) == 1 && ps[0].Tier == whatsapp.Tier250 && ps[0].Source == catalog.TierFromProvider {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("portfolios %+v", ps)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A signed account webhook about a template or WABA no company has is
// acknowledged (200) and counted as ignored; one about a known template
// counts as applied, once or twice alike.
func TestAccountWebhookUnknownIDs(t *testing.T) {
	s := newStack(t)
	tn := s.serve("acme")
	body := func(waba, name string) []byte {
		return []byte(`{"object":"whatsapp_business_account","entry":[{"id":"` + waba + `","time":1750000000,"changes":[` +
			`{"field":"message_template_status_update","value":{"event":"PAUSED","message_template_id":77,"message_template_name":"` + name +
			`","message_template_language":"en_US","reason":"NONE","other_info":{"title":"FIRST_PAUSE","description":"paused"}}}]}]}`)
	}
	post := func(b []byte) string {
		t.Helper()
		r := s.do(http.MethodPost, "/webhooks/whatsapp", "", b, whatsapp.SignatureHeader, whatsapp.Sign(testAppSecret, b))
		if r.status != http.StatusOK {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		return string(r.body)
	}
	if got := post(body("999999", "hello")); !strings.Contains(got, `"account_changes":0,"ignored":1`) {
		t.Fatalf("unknown WABA: %s", got)
	}
	if got := post(body(tn.account.PhoneNumberID, "nope")); !strings.Contains(got, `"account_changes":0,"ignored":1`) {
		t.Fatalf("unknown template: %s", got)
	}
	for range 2 {
		if got := post(body(tn.account.PhoneNumberID, "hello")); !strings.Contains(got, `"account_changes":1,"ignored":0`) {
			t.Fatalf("known template: %s", got)
		}
	}
	got, err := s.cat.CompanyTemplate(context.Background(), tn.company.ID, tn.template.ID)
	if err != nil || got.Status != "PAUSED" || got.ProviderTemplateID != "77" || got.PausedUntil == nil {
		t.Fatalf("template %+v, %v", got.TemplateState, err)
	}
	hist, err := s.cat.TemplateHistory(context.Background(), tn.company.ID, tn.template.ID)
	if err != nil || len(hist) != 1 {
		t.Fatalf("history %+v, %v", hist, err)
	}
}
