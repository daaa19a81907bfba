package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
	"github.com/parleyhq/parley/pkg/delivery"
	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/pkg/secretbox"
)

// stack is the gateway plus both dispatchers (the same engine the
// dispatcher binaries run) and the provider simulator, all against the
// gateway harness's database, NATS and Redis, sharing its clock.
type stack struct {
	*gw
	sim    *whatsappsim.Sim
	simURL string
}

func newStack(t *testing.T) *stack {
	t.Helper()
	return newStackOn(t, newGateway(t, gwOptions{}), 1)
}

// newStackOn starts the simulator and the dispatchers, campaigns of them
// on the campaign lane (competing for its messages), against g.
func newStackOn(t *testing.T, g *gw, campaigns int) *stack {
	t.Helper()
	sim, err := whatsappsim.New(whatsappsim.Config{
		Throughput: 1000,
		Callbacks: whatsappsim.CallbackConfig{
			CallbackSettings: whatsappsim.CallbackSettings{
				URL: g.url + "/webhooks/whatsapp", AppSecret: testAppSecret,
				SentDelay: 5 * time.Millisecond, DeliveredDelay: 20 * time.Millisecond, ReadDelay: 40 * time.Millisecond,
			},
			QueueSize: 10000, BatchSize: 20, Workers: 2, Timeout: 5 * time.Second, MaxAttempts: 3,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { srv.Close(); _ = sim.Close() })
	client, err := whatsapp.NewClient(whatsapp.Config{BaseURL: srv.URL, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	rdb := ratelimit.NewRedisClient(g.redis)
	t.Cleanup(func() { _ = rdb.Close() })
	limiter, err := ratelimit.New(rdb, g.redis, zap.NewNop(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(limiter.Close)
	box, err := secretbox.New(secretbox.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	cfg := delivery.Config{
		Workers: 64, ClaimBatch: 100, Lease: time.Minute, MaxAttempts: 3, BackoffBase: 10 * time.Millisecond,
		BackoffCap: 50 * time.Millisecond, PollInterval: 25 * time.Millisecond, FlushInterval: 5 * time.Millisecond,
		FlushSize: 100, SweepInterval: 100 * time.Millisecond, ExpandWorkers: 2, AckWait: 30 * time.Second,
		CacheTTL: time.Second, ShutdownTimeout: 5 * time.Second,
	}
	lanes := []record.Lane{record.LaneAutomation}
	for range campaigns {
		lanes = append(lanes, record.LaneCampaign)
	}
	for _, lane := range lanes {
		d, err := delivery.New(lane, cfg, delivery.Deps{
			Pool: g.pool, JS: g.js, Bus: g.busCfg, Catalog: catalog.NewStore(g.pool, box), Sender: client,
			Throttle: limiter, Clock: g.clock.now, Log: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
			Registry: prometheus.NewRegistry(),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("%s dispatcher: %v", lane, err)
			}
		})
	}
	return &stack{gw: g, sim: sim, simURL: srv.URL}
}

// serve provisions a tenant whose account the simulator accepts.
func (s *stack) serve(slug string) tenant {
	s.t.Helper()
	tn := s.provision(slug)
	if err := s.sim.SetAccount(whatsappsim.Account{PhoneNumberID: tn.account.PhoneNumberID, Token: "tok", ThroughputPerSecond: 1000}); err != nil {
		s.t.Fatal(err)
	}
	return tn
}

// batch reads GET /api/batches/{id} until cond holds or the deadline passes.
func (s *stack) waitBatch(key, id string, within time.Duration, cond func(b map[string]any) bool) map[string]any {
	s.t.Helper()
	deadline := time.Now().Add(within)
	var last map[string]any
	for {
		r := s.do(http.MethodGet, "/api/batches/"+id, key, nil)
		if r.status == 200 {
			last = r.json(s.t)
			if cond(last) {
				return last
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("batch %s: last seen %v (status %d)", id, last, r.status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func counts(b map[string]any) map[string]int {
	out := map[string]int{}
	for k, v := range b["counts"].(map[string]any) {
		out[k] = int(v.(float64))
	}
	return out
}

func completed(b map[string]any) bool { return b["status"] == "completed" }

func (s *stack) received(to string) []whatsappsim.Received {
	return s.sim.Messages(whatsappsim.Filter{To: strings.TrimPrefix(to, "+"), Limit: 1000})
}

func (s *stack) optOut(companyID int64, phone string) {
	s.t.Helper()
	if _, err := s.pool.Exec(context.Background(), `
		INSERT INTO contacts (company_id, phone, opted_out_at) VALUES ($1, $2, now())
		ON CONFLICT (company_id, phone) DO UPDATE SET opted_out_at = now()`, companyID, phone); err != nil {
		s.t.Fatal(err)
	}
}

func TestEndToEndCampaign(t *testing.T) {
	s := newStack(t)
	co := s.serve("acme")
	s.optOut(co.company.ID, "+393330000001")

	// Duplicates (with and without '+') go once; the opted-out contact is skipped.
	r := s.post("/api/campaigns/send", co.key, campaignBody(co.campaign.ID, "+393330000001", "393330000002", "+393330000002", "+393330000003"))
	if r.status != 202 || r.json(t)["contacts"] != float64(3) {
		t.Fatalf("%d %s", r.status, r.body)
	}
	id := r.json(t)["batch_id"].(string)
	b := s.waitBatch(co.key, id, 10*time.Second, completed)
	c := counts(b)
	if c["skipped_opt_out"] != 1 || c["sent"]+c["delivered"]+c["read"] != 2 {
		t.Fatalf("counts %v", c)
	}
	if n := len(s.received("+393330000001")); n != 0 {
		t.Fatalf("opted-out contact received %d messages", n)
	}
	for _, p := range []string{"+393330000002", "+393330000003"} {
		if n := len(s.received(p)); n != 1 {
			t.Fatalf("%s received %d messages, want 1", p, n)
		}
	}
	// The provider's callbacks move the messages on to read.
	s.waitBatch(co.key, id, 10*time.Second, func(b map[string]any) bool { return counts(b)["read"] == 2 })

	// Forced: the opted-out contact gets it.
	r = s.post("/api/campaigns/send", co.key, campaignBody(co.campaign.ID, "+393330000001")[:len(campaignBody(co.campaign.ID, "+393330000001"))-1]+`,"is_forced":true}`)
	if r.status != 202 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	s.waitBatch(co.key, r.json(t)["batch_id"].(string), 10*time.Second, completed)
	if n := len(s.received("+393330000001")); n != 1 {
		t.Fatalf("forced send: opted-out contact received %d messages, want 1", n)
	}

	// Another company's batch is not found.
	rival := s.serve("rival")
	wantDetail(t, s.do(http.MethodGet, "/api/batches/"+id, rival.key, nil), 404, "Batch not found")
	wantDetail(t, s.do(http.MethodGet, "/api/batches/not-a-uuid", co.key, nil), 404, "Batch not found")
}

func TestEndToEndScheduledSend(t *testing.T) {
	s := newStack(t)
	co := s.serve("acme")
	at := s.clock.now().Add(2 * time.Hour).Format(time.RFC3339)
	r := s.post("/api/campaigns/send", co.key, fmt.Sprintf(`{"campaign_id":%d,"contacts":["+393330000010"],"scheduled_at":%q}`, co.campaign.ID, at))
	if r.status != 202 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	id := r.json(t)["batch_id"].(string)
	s.waitBatch(co.key, id, 10*time.Second, func(b map[string]any) bool { return b["status"] == "scheduled" })
	time.Sleep(300 * time.Millisecond) // several polls of the dispatcher
	if n := len(s.received("+393330000010")); n != 0 {
		t.Fatalf("scheduled message sent %d times before its time", n)
	}
	s.clock.add(2*time.Hour + time.Second)
	s.waitBatch(co.key, id, 10*time.Second, completed)
	if n := len(s.received("+393330000010")); n != 1 {
		t.Fatalf("scheduled message received %d times, want 1", n)
	}
}

func TestEndToEndDeliveryHours(t *testing.T) {
	s := newStack(t)
	co := s.serve("acme")
	ctx := context.Background()
	// A window that opens one hour from now, in the account's timezone.
	loc, _ := time.LoadLocation("America/New_York")
	local := s.clock.now().In(loc)
	midnight := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, loc)
	start := local.Add(time.Hour).Sub(midnight).Truncate(time.Minute)
	if start >= 23*time.Hour {
		start -= 22 * time.Hour // keep the window within one day; it then opened earlier today and is still 1h ahead tomorrow
	}
	tz := "America/New_York"
	if _, err := s.cat.UpdateMessagingAccount(ctx, co.account.ID, catalog.AccountUpdate{Timezone: &tz,
		Window: &catalog.DeliveryWindow{Start: start, End: start + 30*time.Minute}}); err != nil {
		t.Fatal(err)
	}
	r := s.post("/api/campaigns/send", co.key, campaignBody(co.campaign.ID, "+393330000020"))
	if r.status != 202 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	id := r.json(t)["batch_id"].(string)
	s.waitBatch(co.key, id, 10*time.Second, func(b map[string]any) bool { return counts(b)["deferred"] == 1 })
	if n := len(s.received("+393330000020")); n != 0 {
		t.Fatal("sent outside delivery hours")
	}
	var notBefore time.Time
	if err := s.pool.QueryRow(ctx, `SELECT not_before FROM messages WHERE batch_id = $1`, id).Scan(&notBefore); err != nil {
		t.Fatal(err)
	}
	if got := notBefore.In(loc); got.Sub(time.Date(got.Year(), got.Month(), got.Day(), 0, 0, 0, 0, loc)) != start {
		t.Fatalf("deferred to %s, want the window's opening at %s local", got, start)
	}
	s.clock.add(notBefore.Sub(s.clock.now()) + time.Second)
	s.waitBatch(co.key, id, 10*time.Second, completed)
	if n := len(s.received("+393330000020")); n != 1 {
		t.Fatalf("received %d after the window opened, want 1", n)
	}
}

func TestEndToEndAutomation(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	co := s.serve("acme")
	// The template: image header, body {{1}} first name, {{2}} order_id, two URL buttons.
	tpl, err := s.cat.CreateTemplate(ctx, catalog.NewTemplate{CompanyID: co.company.ID, Template: whatsapp.Template{
		Name: "order_ready", Language: "en_US", HeaderKind: whatsapp.HeaderImage, HeaderMediaURL: "https://cdn.example/default.png",
		BodyParameters: []whatsapp.Binding{{Source: "first_name", Default: "there"}, {Source: "variable", Name: "order_id"}},
		URLButtons:     []whatsapp.URLButton{{Base: "https://shop.example/o/", DefaultSuffix: "home"}, {Base: "https://shop.example/t/", DefaultSuffix: "none"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	au, err := s.cat.CreateAutomation(ctx, catalog.NewAutomation{CompanyID: co.company.ID, Name: "ready", Active: true,
		TemplateID: &tpl.ID, MessagingAccountID: &co.account.ID, TriggerVariables: []string{"order_id"}})
	if err != nil {
		t.Fatal(err)
	}
	// An existing contact, with a name and a variable the trigger does not repeat.
	if _, err := s.pool.Exec(ctx, `INSERT INTO contacts (company_id, phone, first_name, variables, opted_out_at)
		VALUES ($1, '+393330000000', 'Ada', '{"tier":"gold","order_id":"old"}', now())`, co.company.ID); err != nil {
		t.Fatal(err)
	}
	contacts := make([]string, 60)
	for i := range contacts {
		extra := ""
		if i == 1 {
			extra = `,"image_url":"https://cdn.example/mine.png"`
		}
		name := fmt.Sprintf(`,"first_name":"N%d"`, i)
		if i == 0 {
			name = "" // the existing contact keeps its stored name
		}
		contacts[i] = fmt.Sprintf(`{"phone":"+39333%07d"%s%s,"variables":{"order_id":"A%d"}}`, i, name, extra, i)
	}
	body := fmt.Sprintf(`{"automation_id":%d,"contacts":[%s],"image_url":"https://cdn.example/all.png","url":"https://shop.example/o/A-special"}`,
		au.ID, strings.Join(contacts, ","))
	r := s.post("/api/automations/send", co.key, body)
	if r.status != 202 || r.json(t)["contacts"] != float64(50) {
		t.Fatalf("%d %s", r.status, r.body)
	}
	id := r.json(t)["batch_id"].(string)
	b := s.waitBatch(co.key, id, 15*time.Second, completed)
	if c := counts(b); c["failed"] != 0 || c["skipped_opt_out"] != 0 {
		t.Fatalf("counts %v (automations bypass opt-out)", c)
	}
	for i := range 60 {
		n := len(s.received(fmt.Sprintf("+39333%07d", i)))
		if (i < 50 && n != 1) || (i >= 50 && n != 0) {
			t.Fatalf("contact %d received %d messages", i, n)
		}
	}
	// Personalisation: names, variables, media precedence, URL suffixes.
	text := func(cs []whatsapp.Component, typ string, i int) string {
		for _, c := range cs {
			if c.Type == typ && (typ != "button" || c.Index == strconv.Itoa(i)) {
				if typ == "header" {
					return c.Parameters[0].Image.Link
				}
				if typ == "body" {
					return c.Parameters[i].Text
				}
				return c.Parameters[0].Text
			}
		}
		return ""
	}
	m0 := s.received("+393330000000")[0]
	m1 := s.received("+393330000001")[0]
	if text(m0.Components, "body", 0) != "Ada" || text(m0.Components, "body", 1) != "A0" || text(m1.Components, "body", 0) != "N1" {
		t.Fatalf("body parameters: %+v / %+v", m0.Components, m1.Components)
	}
	if text(m0.Components, "header", 0) != "https://cdn.example/all.png" || text(m1.Components, "header", 0) != "https://cdn.example/mine.png" {
		t.Fatalf("media precedence: %q %q", text(m0.Components, "header", 0), text(m1.Components, "header", 0))
	}
	if text(m0.Components, "button", 0) != "A-special" || text(m0.Components, "button", 1) != "none" {
		t.Fatalf("URL buttons: %q %q", text(m0.Components, "button", 0), text(m0.Components, "button", 1))
	}
	// Contacts: 49 created, the existing one merged (new order_id, tier kept, name kept).
	var n int
	var vars map[string]string
	var first string
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM contacts WHERE company_id = $1`, co.company.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if err := s.pool.QueryRow(ctx, `SELECT first_name, variables FROM contacts WHERE company_id = $1 AND phone = '+393330000000'`, co.company.ID).Scan(&first, &vars); err != nil {
		t.Fatal(err)
	}
	if n != 50 || first != "Ada" || vars["order_id"] != "A0" || vars["tier"] != "gold" {
		t.Fatalf("contacts: %d rows; existing one %q %v", n, first, vars)
	}
}

func TestWebhooks(t *testing.T) {
	g := newGateway(t, gwOptions{})
	ctx := context.Background()
	co := g.provision("acme")

	// The subscription handshake.
	if r := g.do(http.MethodGet, "/webhooks/whatsapp?hub.mode=subscribe&hub.verify_token="+testVerifyToken+"&hub.challenge=12345", "", nil); r.status != 200 || string(r.body) != "12345" {
		t.Fatalf("handshake: %d %s", r.status, r.body)
	}
	if r := g.do(http.MethodGet, "/webhooks/whatsapp?hub.mode=subscribe&hub.verify_token=wrong&hub.challenge=12345", "", nil); r.status != 403 {
		t.Fatalf("handshake with a wrong token: %d", r.status)
	}

	// A message recorded as sent, with its wamid.
	batch := "0192f5d0-0000-7000-8000-0000000000aa"
	if _, err := g.pool.Exec(ctx, `
		INSERT INTO batches (id, company_id, kind, source, campaign_id, contact_count, accepted_at, status)
		VALUES ($1, $2, 'campaign', 'test', $3, 1, now(), 'completed');
		`, batch, co.company.ID, co.campaign.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := g.pool.Exec(ctx, `
		INSERT INTO messages (batch_id, seq, company_id, phone, messaging_account_id, template_id, state, provider_message_id, sent_at)
		VALUES ($1, 0, $2, '+393331234567', $3, $4, 'sent', 'wamid.A', now())`, batch, co.company.ID, co.account.ID, co.template.ID); err != nil {
		t.Fatal(err)
	}
	post := func(status, wamid string, sign bool) response {
		body := fmt.Sprintf(`{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages","value":{"messaging_product":"whatsapp","metadata":{"display_phone_number":"1","phone_number_id":%q},"statuses":[{"id":%q,"status":%q,"timestamp":"1700000000","recipient_id":"393331234567"}]}}]}]}`,
			co.account.PhoneNumberID, wamid, status)
		sig := whatsapp.Sign(testAppSecret, []byte(body))
		if !sign {
			sig = whatsapp.Sign("another-secret", []byte(body))
		}
		return g.post("/webhooks/whatsapp", "", body, whatsapp.SignatureHeader, sig)
	}
	state := func() string {
		var s string
		if err := g.pool.QueryRow(ctx, `SELECT state::text FROM messages WHERE provider_message_id = 'wamid.A'`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if r := post("delivered", "wamid.A", false); r.status != 401 || state() != "sent" {
		t.Fatalf("bad signature: %d %s, state %s", r.status, r.body, state())
	}
	if r := post("read", "wamid.A", true); r.status != 200 || state() != "read" {
		t.Fatalf("read: %d %s, state %s", r.status, r.body, state())
	}
	// Out of order: a late "delivered" never moves it back.
	if r := post("delivered", "wamid.A", true); r.status != 200 || state() != "read" {
		t.Fatalf("late delivered: %d, state %s", r.status, state())
	}
	// A callback before its wamid is recorded is kept for later.
	if r := post("delivered", "wamid.unknown", true); r.status != 200 {
		t.Fatalf("unknown wamid: %d %s", r.status, r.body)
	}
	var backlog int
	if err := g.pool.QueryRow(ctx, `SELECT count(*) FROM provider_status_backlog WHERE provider_message_id = 'wamid.unknown'`).Scan(&backlog); err != nil || backlog != 1 {
		t.Fatalf("backlog %d, %v", backlog, err)
	}
	if r := g.post("/webhooks/whatsapp", "", `{"object":"page"}`, whatsapp.SignatureHeader, whatsapp.Sign(testAppSecret, []byte(`{"object":"page"}`))); r.status != 200 {
		t.Fatalf("other object: %d %s", r.status, r.body)
	}
}
