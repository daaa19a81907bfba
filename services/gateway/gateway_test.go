package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/apikey"
	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/services/gateway/internal/idempotency"
)

func campaignBody(id int64, contacts ...string) string {
	return fmt.Sprintf(`{"campaign_id":%d,"contacts":["%s"]}`, id, strings.Join(contacts, `","`))
}

// wantDetail checks a {"detail": "..."} answer whole: the status, the
// JSON Content-Type and the body byte for byte (no other member, nothing
// after it), as the README and the spec give them.
func wantDetail(t *testing.T, r response, status int, detail string) {
	t.Helper()
	want, err := json.Marshal(map[string]string{"detail": detail})
	if err != nil {
		t.Fatal(err)
	}
	wantBody(t, r, status, string(want))
}

// wantBody checks an answer's status, JSON Content-Type and exact body.
func wantBody(t *testing.T, r response, status int, body string) {
	t.Helper()
	if r.status != status || string(r.body) != body {
		t.Fatalf("got %d %s\nwant %d %s", r.status, r.body, status, body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json", ct)
	}
}

func TestUnauthorized(t *testing.T) {
	g := newGateway(t, gwOptions{})
	acme := g.provision("acme")
	body := campaignBody(acme.campaign.ID, "+393331234567")
	ctx := context.Background()

	unknown, _, _ := apikey.Generate()
	// The last character changed (to y where it is x): the checksum fails.
	badChecksum := acme.key[:len(acme.key)-1] + "x"
	if strings.HasSuffix(acme.key, "x") {
		badChecksum = acme.key[:len(acme.key)-1] + "y"
	}
	for name, key := range map[string]string{
		"absent":       "",
		"malformed":    "service_abc_def",
		"bad checksum": badChecksum,
		"unknown":      unknown,
		"wrong secret": func() string {
			p, _ := apikey.Parse(unknown)
			return "service_" + strings.Split(acme.key, "_")[1] + "_" + p.Secret
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			wantDetail(t, g.post("/api/campaigns/send", key, body), 401, "Invalid API key")
		})
	}

	t.Run("revoked, after the admin broadcast", func(t *testing.T) {
		co := g.provision("revoked-co")
		if r := g.post("/api/campaigns/send", co.key, campaignBody(co.campaign.ID, "+393331234567")); r.status != 202 {
			t.Fatalf("before revoke: %d %s", r.status, r.body)
		}
		p, _ := apikey.Parse(co.key)
		if _, err := g.keys.Revoke(ctx, co.company.ID, p.KeyID, apikey.Actor{Label: "test"}); err != nil {
			t.Fatal(err)
		}
		g.broadcast(bus.KindAPIKey, p.KeyID)
		wantDetail(t, g.post("/api/campaigns/send", co.key, campaignBody(co.campaign.ID, "+393331234567")), 401, "Invalid API key")
	})

	t.Run("rotated: works at 23h59m, refused at 24h01m", func(t *testing.T) {
		co := g.provision("rotated-co")
		newKey, _, prev, err := g.keys.Rotate(ctx, co.company.ID, apikey.Actor{Label: "test"})
		if err != nil {
			t.Fatal(err)
		}
		g.broadcast(bus.KindAPIKey, prev.KeyID)
		send := func(key string) response {
			return g.post("/api/campaigns/send", key, campaignBody(co.campaign.ID, "+393331234567"))
		}
		g.clock.add(23*time.Hour + 59*time.Minute)
		if r := send(co.key); r.status != 202 {
			t.Fatalf("previous key at 23h59m: %d %s", r.status, r.body)
		}
		g.clock.add(2 * time.Minute)
		wantDetail(t, send(co.key), 401, "Invalid API key")
		if r := send(newKey); r.status != 202 {
			t.Fatalf("new key: %d %s", r.status, r.body)
		}
	})
}

func TestForbidden(t *testing.T) {
	g := newGateway(t, gwOptions{})
	ctx := context.Background()
	co := g.provision("acme")
	off, on := false, true
	if _, err := g.cat.UpdateCompany(ctx, co.company.ID, catalog.CompanyUpdate{SubscriptionActive: &off}); err != nil {
		t.Fatal(err)
	}
	g.broadcast(bus.KindCompany, strconv.FormatInt(co.company.ID, 10))
	for _, path := range []string{"/api/campaigns/send", "/api/automations/send"} {
		wantDetail(t, g.post(path, co.key, `{}`), 403, "Subscription required")
	}
	if _, err := g.cat.UpdateCompany(ctx, co.company.ID, catalog.CompanyUpdate{SubscriptionActive: &on, Provisioned: &off}); err != nil {
		t.Fatal(err)
	}
	g.broadcast(bus.KindCompany, strconv.FormatInt(co.company.ID, 10))
	wantBody(t, g.post("/api/campaigns/send", co.key, `{}`), 403,
		`{"detail":"Workspace not provisioned: finish setting up your Parley workspace before using the API"}`)
}

func TestRateLimits(t *testing.T) {
	g := newGateway(t, gwOptions{})
	co := g.provision("acme")
	other := g.provision("other")
	for _, tc := range []struct {
		path  string
		n     int
		per   time.Duration
		body  string
		error string
	}{
		{"/api/campaigns/send", 10, time.Second, campaignBody(co.campaign.ID, "+393331234567"), `{"error":"Rate limit exceeded: 10 per 1 second"}`},
		{"/api/automations/send", 20, time.Second, `{}`, `{"error":"Rate limit exceeded: 20 per 1 second"}`},
		{"/api/segments/create", 10, time.Second, `{}`, `{"error":"Rate limit exceeded: 10 per 1 second"}`},
		{"/api/segments/1/contacts", 1, time.Minute, `{}`, `{"error":"Rate limit exceeded: 1 per 1 minute"}`},
		{"/api/batch/send", 1, 10 * time.Second, `{}`, `{"error":"Rate limit exceeded: 1 per 10 second"}`},
		{"/api/shopify/send", 1, 10 * time.Second, `{}`, `{"error":"Rate limit exceeded: 1 per 10 second"}`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			r := untilRefused(t, tc.n, tc.per, func() response { return g.post(tc.path, co.key, tc.body) })
			if string(r.body) != tc.error {
				t.Fatalf("over the limit: %d %s", r.status, r.body)
			}
			if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 {
				t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
			}
			if r.header.Get("X-RateLimit-Remaining") != "0" {
				t.Fatalf("X-RateLimit-Remaining %q on a 429", r.header.Get("X-RateLimit-Remaining"))
			}
			// Limits are per company.
			if r := g.post(tc.path, other.key, tc.body); r.status == 429 {
				t.Fatal("another company was limited")
			}
		})
	}
}

// untilRefused sends requests until one is refused (429) and returns that
// one, checking the limit headers of the allowed ones. A limit of n per
// period refills one request every period/n (GCRA, as redis_rate does): at
// least n are allowed, and at most n more than what the time the requests
// took refilled. So a loaded machine whose n requests outlast period/n sees
// one more allowed, and a limiter that lets more through still fails.
func untilRefused(t *testing.T, n int, per time.Duration, send func() response) response {
	t.Helper()
	start := time.Now()
	for allowed := 0; ; allowed++ {
		r := send()
		refilled := int(time.Since(start) * time.Duration(n) / per)
		if r.status == 429 {
			if allowed < n {
				t.Fatalf("request %d of %d refused", allowed+1, n)
			}
			return r
		}
		if allowed+1 > n+refilled {
			t.Fatalf("%d requests allowed in %s at %d per %s (%d refilled meanwhile)", allowed+1, time.Since(start), n, per, refilled)
		}
		if r.header.Get("X-RateLimit-Limit") != strconv.Itoa(n) || r.header.Get("X-RateLimit-Remaining") == "" || r.header.Get("X-RateLimit-Reset") == "" {
			t.Fatalf("limit headers missing on an allowed response: %v", r.header)
		}
	}
}

// TestBatchStatusRateLimit: GET /api/batches/{id} is limited at 20 per
// second per company, answered over HTTP as every limited route is.
func TestBatchStatusRateLimit(t *testing.T) {
	g := newGateway(t, gwOptions{})
	co, other := g.provision("acme"), g.provision("other")
	path := "/api/batches/01900000-0000-7000-8000-000000000000" // no such batch: 404 while allowed
	for i := range 20 {
		r := g.do(http.MethodGet, path, co.key, nil)
		if r.status == 429 {
			t.Fatalf("request %d of 20 refused", i+1)
		}
		wantDetail(t, r, 404, "Batch not found")
		if r.header.Get("X-RateLimit-Limit") != "20" {
			t.Fatalf("X-RateLimit-Limit %q", r.header.Get("X-RateLimit-Limit"))
		}
	}
	// The budget refills one request every 50 ms, which a slow machine's
	// sequential requests can match: a burst outruns it.
	burst := make([]response, 30)
	errs := make([]error, len(burst))
	var wg sync.WaitGroup
	for i := range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodGet, g.url+path, nil)
			req.Header.Set("service-api-key", co.key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			burst[i], errs[i] = response{status: resp.StatusCode, header: resp.Header, body: b}, err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(burst, func(r response) bool { return r.status == 429 })
	if i < 0 {
		t.Fatalf("30 requests at once past the budget, none refused: first %d %s", burst[0].status, burst[0].body)
	}
	r := burst[i]
	wantBody(t, r, 429, `{"error":"Rate limit exceeded: 20 per 1 second"}`)
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 || r.header.Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("Retry-After %q, X-RateLimit-Remaining %q", r.header.Get("Retry-After"), r.header.Get("X-RateLimit-Remaining"))
	}
	wantDetail(t, g.do(http.MethodGet, path, other.key, nil), 404, "Batch not found")
}

// TestOrderOfChecks: 401, 403, 429, 422 (schema), 404, 422 (configuration), 202.
func TestOrderOfChecks(t *testing.T) {
	g := newGateway(t, gwOptions{})
	ctx := context.Background()
	co := g.provision("acme")
	invalid := `{"campaign_id":"x","contacts":"nope"}`

	wantDetail(t, g.post("/api/campaigns/send", "", invalid), 401, "Invalid API key")

	noSub := g.provision("nosub")
	off := false
	if _, err := g.cat.UpdateCompany(ctx, noSub.company.ID, catalog.CompanyUpdate{SubscriptionActive: &off}); err != nil {
		t.Fatal(err)
	}
	wantDetail(t, g.post("/api/campaigns/send", noSub.key, invalid), 403, "Subscription required")

	if r := g.post("/api/campaigns/send", co.key, invalid); r.status != 422 {
		t.Fatalf("invalid body: %d %s", r.status, r.body)
	}
	// An unknown campaign with a body that is otherwise invalid is a 422 first.
	if r := g.post("/api/campaigns/send", co.key, `{"campaign_id":999999,"contacts":["12"]}`); r.status != 422 {
		t.Fatalf("schema before lookup: %d %s", r.status, r.body)
	}
	wantDetail(t, g.post("/api/campaigns/send", co.key, campaignBody(999999, "+393331234567")), 404, "Campaign not found")
	wantDetail(t, g.post("/api/campaigns/send", co.key, campaignBody(g.provision("rival").campaign.ID, "+393331234567")), 404, "Campaign not found")

	// Automation: a missing automation is 404 before its configuration is checked.
	bare, err := g.cat.CreateAutomation(ctx, catalog.NewAutomation{CompanyID: co.company.ID, Name: "bare", Active: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := g.post("/api/automations/send", co.key, fmt.Sprintf(`{"automation_id":%d,"contacts":[{"phone":"1"}]}`, bare.ID)); r.status != 422 || !strings.Contains(string(r.body), "string_pattern_mismatch") {
		t.Fatalf("schema before configuration: %d %s", r.status, r.body)
	}
	r := g.post("/api/automations/send", co.key, fmt.Sprintf(`{"automation_id":%d,"contacts":[{"phone":"+393331234567"}]}`, bare.ID))
	wantBody(t, r, 422, fmt.Sprintf(`{"detail":[`+
		`{"type":"automation_template_missing","loc":["body","automation_id"],"msg":"Automation %[1]d has no WhatsApp template selected","input":%[1]d},`+
		`{"type":"automation_account_missing","loc":["body","automation_id"],"msg":"Automation %[1]d has no connected WhatsApp account assigned","input":%[1]d}]}`, bare.ID))
	// No template alone: the account is there and connected.
	noTpl, err := g.cat.CreateAutomation(ctx, catalog.NewAutomation{CompanyID: co.company.ID, Name: "no-template", Active: true, MessagingAccountID: &co.account.ID})
	if err != nil {
		t.Fatal(err)
	}
	wantBody(t, g.post("/api/automations/send", co.key, fmt.Sprintf(`{"automation_id":%d,"contacts":[{"phone":"+393331234567"}]}`, noTpl.ID)), 422,
		fmt.Sprintf(`{"detail":[{"type":"automation_template_missing","loc":["body","automation_id"],"msg":"Automation %[1]d has no WhatsApp template selected","input":%[1]d}]}`, noTpl.ID))

	// Rate limit comes before the schema: exhaust it with invalid bodies.
	for range 10 {
		g.post("/api/campaigns/send", co.key, invalid)
	}
	if r := g.post("/api/campaigns/send", co.key, invalid); r.status != 429 {
		t.Fatalf("429 before 422: %d %s", r.status, r.body)
	}
}

func TestCampaignSend(t *testing.T) {
	g := newGateway(t, gwOptions{})
	co := g.provision("acme")
	r := g.post("/api/campaigns/send", co.key,
		`{"campaign_id":`+strconv.FormatInt(co.campaign.ID, 10)+`,"contacts":["+393331234567","393331234567","+14155550100","+393331234567"],"scheduled_at":"2999-01-02T03:04:05+02:00"}`)
	if r.status != 202 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	m := r.json(t)
	if m["status"] != "accepted" || m["contacts"] != float64(2) || len(m["batch_id"].(string)) != 36 {
		t.Fatalf("202 body %s", r.body)
	}
	var b sendsv1.CampaignBatch
	g.sentBatch(co.company.ID, r, &b)
	if b.BatchId != m["batch_id"] || b.CampaignId != co.campaign.ID || b.CompanyId != co.company.ID ||
		strings.Join(b.Phones, ",") != "+393331234567,+14155550100" || b.IsForced ||
		!b.ScheduledAt.AsTime().Equal(time.Date(2999, 1, 2, 1, 4, 5, 0, time.UTC)) {
		t.Fatalf("published %v", &b)
	}
	for _, h := range []string{"X-Content-Type-Options", "Cache-Control", "Content-Security-Policy"} {
		if r.header.Get(h) == "" {
			t.Errorf("security header %s missing", h)
		}
	}

	// A time in the past means now; no offset means UTC.
	r = g.post("/api/campaigns/send", co.key, campaignBody(co.campaign.ID, "+393331234567")[:len(campaignBody(co.campaign.ID, "+393331234567"))-1]+`,"scheduled_at":"2001-01-01T00:00:00","is_forced":true}`)
	if r.status != 202 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	g.sentBatch(co.company.ID, r, &b)
	if b.ScheduledAt != nil || !b.IsForced {
		t.Fatalf("past schedule kept or is_forced lost: %v", &b)
	}

	// Before any dispatcher takes them, both batches are known by their id,
	// from the stream, and only to their company.
	first := g.do(http.MethodGet, "/api/batches/"+m["batch_id"].(string), co.key, nil)
	second := g.do(http.MethodGet, "/api/batches/"+b.BatchId, co.key, nil)
	if first.status != 200 || second.status != 200 {
		t.Fatalf("GET pending batches: %d %s / %d %s", first.status, first.body, second.status, second.body)
	}
	f, s := first.json(t), second.json(t)
	if f["status"] != "accepted" || f["contacts"] != float64(2) || f["scheduled_at"] != "2999-01-02T01:04:05Z" || f["is_forced"] != false ||
		s["status"] != "accepted" || s["contacts"] != float64(1) || s["is_forced"] != true || s["kind"] != "campaign" {
		t.Fatalf("pending batches: %s / %s", first.body, second.body)
	}
	wantDetail(t, g.do(http.MethodGet, "/api/batches/"+b.BatchId, g.provision("rival").key, nil), 404, "Batch not found")
}

func TestAutomationTrigger(t *testing.T) {
	g := newGateway(t, gwOptions{})
	ctx := context.Background()
	co := g.provision("acme")
	contacts := make([]string, 60)
	for i := range contacts {
		contacts[i] = fmt.Sprintf(`{"phone":"39333%07d","first_name":"N%d","variables":{"order_id":"o%d"}}`, i, i, i)
	}
	body := func(id int64, cs []string) string {
		return fmt.Sprintf(`{"automation_id":%d,"contacts":[%s],"image_url":"https://cdn.example/a.png","url2":"https://x.example/t"}`, id, strings.Join(cs, ","))
	}
	r := g.post("/api/automations/send", co.key, body(co.automation.ID, contacts))
	if r.status != 202 || r.json(t)["contacts"] != float64(50) {
		t.Fatalf("60 contacts: %d %s", r.status, r.body)
	}
	var b sendsv1.AutomationBatch
	g.sentBatch(co.company.ID, r, &b)
	if len(b.Contacts) != 50 || b.Contacts[0].Phone != "+393330000000" || b.Contacts[49].GetFirstName() != "N49" ||
		b.Contacts[3].Variables["order_id"] != "o3" || b.ImageUrl != "https://cdn.example/a.png" || b.Url2 != "https://x.example/t" || b.Url != "" {
		t.Fatalf("published %v", &b)
	}

	// Missing trigger variables: one item per contact and variable, among the processed 50 only.
	cs := []string{`{"phone":"+393330000001","variables":{"other":"x"}}`, `{"phone":"+393330000002"}`, `{"phone":"+393330000003","variables":{"order_id":"1"}}`}
	r = g.post("/api/automations/send", co.key, body(co.automation.ID, cs))
	wantBody(t, r, 422, `{"detail":[`+
		`{"type":"missing","loc":["body","contacts",0,"variables","order_id"],"msg":"Field required","input":{"other":"x"}},`+
		`{"type":"missing","loc":["body","contacts",1,"variables","order_id"],"msg":"Field required","input":{}}]}`)

	// 404: unknown, inactive, not api, another company's.
	// Each is otherwise sendable (template, connected account), so only the
	// named reason can make it a 404.
	inactive, err := g.cat.CreateAutomation(ctx, catalog.NewAutomation{CompanyID: co.company.ID, Name: "off", TemplateID: &co.template.ID, MessagingAccountID: &co.account.ID})
	if err != nil {
		t.Fatal(err)
	}
	event, err := g.cat.CreateAutomation(ctx, catalog.NewAutomation{CompanyID: co.company.ID, Name: "ev", Type: catalog.TypeEvent, Active: true, TemplateID: &co.template.ID, MessagingAccountID: &co.account.ID})
	if err != nil {
		t.Fatal(err)
	}
	rival := g.provision("rival")
	one := []string{`{"phone":"+393330000001","variables":{"order_id":"1"}}`}
	for name, id := range map[string]int64{"unknown": 999999, "inactive": inactive.ID, "event": event.ID, "rival": rival.automation.ID} {
		t.Run(name, func(t *testing.T) {
			wantDetail(t, g.post("/api/automations/send", co.key, body(id, one)), 404, "Automation not found")
		})
	}

	// A disconnected account is a 422 with its own message once the change is broadcast.
	off := false
	if _, err := g.cat.UpdateMessagingAccount(ctx, co.account.ID, catalog.AccountUpdate{Connected: &off}); err != nil {
		t.Fatal(err)
	}
	g.broadcast(bus.KindAutomation, strconv.FormatInt(co.automation.ID, 10))
	r = g.post("/api/automations/send", co.key, body(co.automation.ID, one))
	wantBody(t, r, 422, fmt.Sprintf(`{"detail":[{"type":"automation_account_missing","loc":["body","automation_id"],"msg":"Automation %[1]d has no connected WhatsApp account assigned","input":%[1]d}]}`, co.automation.ID))
}

func TestIdempotencyKey(t *testing.T) {
	g := newGateway(t, gwOptions{})
	co := g.provision("acme")
	body := campaignBody(co.campaign.ID, "+393331234567", "+393331234568")
	before := g.streamCount()
	first := g.post("/api/campaigns/send", co.key, body, "Idempotency-Key", `"order-42"`)
	second := g.post("/api/campaigns/send", co.key, body, "Idempotency-Key", "order-42")
	if first.status != 202 || second.status != 202 || string(first.body) != string(second.body) || second.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %s / %d %s", first.status, first.body, second.status, second.body)
	}
	if n := g.streamCount() - before; n != 1 {
		t.Fatalf("%d batches published for one key, want 1", n)
	}
	r := g.post("/api/campaigns/send", co.key, campaignBody(co.campaign.ID, "+393331234599"), "Idempotency-Key", "order-42")
	if r.status != 422 || !strings.Contains(string(r.body), "idempotency_key_reused") {
		t.Fatalf("other body: %d %s", r.status, r.body)
	}
	// A duplicate while the first is in flight: hold the key as a request would.
	idem := idempotency.New(redisClient(t, g), g.redis.KeyPrefix, time.Hour, time.Minute)
	if d, _, _, err := idem.Begin(context.Background(), co.company.ID, "campaigns_send", "in-flight", idempotency.Fingerprint([]byte(body))); err != nil || d != idempotency.Proceed {
		t.Fatal(d, err)
	}
	if r := g.post("/api/campaigns/send", co.key, body, "Idempotency-Key", "in-flight"); r.status != 409 {
		t.Fatalf("concurrent duplicate: %d %s", r.status, r.body)
	}
	// A refused request releases its key so the client can correct it.
	if r := g.post("/api/campaigns/send", co.key, campaignBody(999999, "+393331234567"), "Idempotency-Key", "fix-me"); r.status != 404 {
		t.Fatal(r.status)
	}
	if r := g.post("/api/campaigns/send", co.key, body, "Idempotency-Key", "fix-me"); r.status != 202 {
		t.Fatalf("after a 404 the key is free: %d %s", r.status, r.body)
	}
	if r := g.post("/api/campaigns/send", co.key, body, "Idempotency-Key", "bad key with spaces"); r.status != 422 {
		t.Fatalf("invalid key: %d %s", r.status, r.body)
	}
}

func TestNoAcceptWithoutTheStream(t *testing.T) {
	g := newGateway(t, gwOptions{})
	co := g.provision("acme")
	body := campaignBody(co.campaign.ID, "+393331234567")
	before := g.streamCount()
	g.nats.Stop()
	var wg sync.WaitGroup
	statuses := make(chan int, 5)
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses <- g.post("/api/campaigns/send", co.key, body, "Idempotency-Key", "k"+strconv.Itoa(i)).status
		}()
	}
	wg.Wait()
	close(statuses)
	for s := range statuses {
		if s != http.StatusServiceUnavailable {
			t.Fatalf("with NATS down: %d, want 503", s)
		}
	}
	g.nats.Start()
	// Wait for the gateway to reconnect, then check nothing was stored.
	deadline := time.Now().Add(10 * time.Second)
	for g.post("/api/campaigns/send", co.key, body, "Idempotency-Key", "k0").status != 202 {
		if time.Now().After(deadline) {
			t.Fatal("gateway did not recover after NATS came back")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if n := g.streamCount() - before; n != 1 {
		t.Fatalf("stream holds %d new batches after 5 refused sends and 1 accepted retry, want 1", n)
	}
}

func TestRedisDownFallsBack(t *testing.T) {
	private := newPrivateRedis(t)
	cfg := private.Config()
	g := newGateway(t, gwOptions{redis: &cfg})
	co := g.provision("acme")
	private.Stop()
	// The per-process limiter holds the route's rate (10 a second, a burst
	// of 10): sends fired together until one is refused are accepted at
	// most that many, however slow the machine (the rate refills while the
	// requests run, so the bound counts the time they took).
	body := campaignBody(co.campaign.ID, "+393331234567")
	start := time.Now()
	accepted, limited := 0, false
	for round := 0; !limited && round < 50; round++ {
		statuses := make(chan response, 10)
		var wg sync.WaitGroup
		for range 10 {
			wg.Add(1)
			go func() { defer wg.Done(); statuses <- g.post("/api/campaigns/send", co.key, body) }()
		}
		wg.Wait()
		close(statuses)
		for r := range statuses {
			switch r.status {
			case 202:
				accepted++
			case 429:
				limited = true
			default:
				t.Fatalf("send with Redis down: %d %s", r.status, r.body)
			}
		}
	}
	allowed := 10 + int(time.Since(start)/(100*time.Millisecond)) + 1
	if !limited || accepted < 10 || accepted > allowed {
		t.Fatalf("with Redis down: %d accepted in %s (allowed %d, the burst at least), a 429 seen: %v", accepted, time.Since(start), allowed, limited)
	}
	var r response
	// With Redis down an Idempotency-Key cannot be honoured: 503, not 5xx from a crash.
	if r := g.post("/api/campaigns/send", g.provision("b").key, campaignBody(co.campaign.ID, "+393331234567"), "Idempotency-Key", "x"); r.status != 503 {
		t.Fatalf("idempotency with Redis down: %d %s", r.status, r.body)
	}
	// The gateway stays ready (it serves, with per-replica limits) and says
	// what it lacks.
	r = g.do("GET", "/readyz", "", nil)
	if r.status != 200 || r.json(t)["status"] != "ready" || !strings.Contains(string(r.body), `"degraded":{"redis":`) {
		t.Fatalf("/readyz with Redis down: %d %s, want 200 naming redis as degraded", r.status, r.body)
	}
}

func TestBodyLimitsAndShapes(t *testing.T) {
	g := newGateway(t, gwOptions{})
	co := g.provision("acme")
	big := `{"campaign_id":1,"contacts":["` + strings.Repeat("1", 2<<20) + `"]}`
	r := g.post("/api/campaigns/send", co.key, big)
	if r.status != 413 || !strings.HasPrefix(r.json(t)["detail"].(string), "Request body too large") {
		t.Fatalf("big body: %d %.200s", r.status, r.body)
	}
	if r := g.do("POST", "/api/campaigns/send", co.key, []byte{0xff, 0xfe, '{'}); r.status != 400 {
		t.Fatalf("non-UTF-8 body: %d %s", r.status, r.body)
	}
	if r := g.do("POST", "/api/campaigns/send", co.key, nil); r.status != 422 || string(r.body) != `{"detail":[{"type":"missing","loc":["body"],"msg":"Field required","input":null}]}` {
		t.Fatalf("empty body: %d %s", r.status, r.body)
	}
	wantDetail(t, g.do("GET", "/api/campaigns/send", co.key, nil), 405, "Method Not Allowed")
	wantDetail(t, g.do("GET", "/nope", "", nil), 404, "Not Found")
}

// A publish in doubt (the group was sent, no acknowledgement came) keeps
// its batch id under the Idempotency-Key; the retry is published alone
// under that id, on the batch's own subject, and found there by GET
// /api/batches/{id}.
func TestDoubtfulPublishRetriesUnderItsID(t *testing.T) {
	g := newGateway(t, gwOptions{})
	co := g.provision("acme")
	ctx := context.Background()
	body := campaignBody(co.campaign.ID, "+393331234567")
	// No stream takes the subjects: the group is published and refused.
	if err := g.js.DeleteStream(ctx, g.busCfg.Stream); err != nil {
		t.Fatal(err)
	}
	if r := g.post("/api/campaigns/send", co.key, body, "Idempotency-Key", "doubt-1"); r.status != http.StatusServiceUnavailable {
		t.Fatalf("without the stream: %d %s", r.status, r.body)
	}
	rdb := redisClient(t, g)
	var rec idempotency.Record
	keys, err := rdb.Keys(ctx, g.redis.KeyPrefix+"idem:"+strconv.FormatInt(co.company.ID, 10)+":campaigns_send:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("idempotency record: %v %v", keys, err)
	}
	raw, err := rdb.Get(ctx, keys[0]).Bytes()
	if err != nil || json.Unmarshal(raw, &rec) != nil || rec.BatchID == "" {
		t.Fatalf("the doubtful publish kept no batch id: %s %v", raw, err)
	}
	if _, err := bus.EnsureStream(ctx, g.js, g.busCfg); err != nil {
		t.Fatal(err)
	}
	r := g.post("/api/campaigns/send", co.key, body, "Idempotency-Key", "doubt-1")
	if r.status != 202 || r.json(t)["batch_id"] != rec.BatchID {
		t.Fatalf("retry: %d %s, want 202 with batch %s", r.status, r.body, rec.BatchID)
	}
	s, err := g.js.Stream(ctx, g.busCfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(ctx, bus.ForBatch(g.busCfg.CampaignSubject(co.company.ID), rec.BatchID))
	if err != nil || m.Header.Get("Nats-Msg-Id") != rec.BatchID {
		t.Fatalf("the retry is not alone on its subject under its id: %v", err)
	}
	if got := g.getBatch(co.key, rec.BatchID); got["status"] != "accepted" || got["contacts"] != float64(1) {
		t.Fatalf("GET the retried batch: %v", got)
	}
}
