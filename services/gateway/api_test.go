package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/contacts"
	"github.com/parleyhq/parley/pkg/ratelimit"
)

// The endpoints the spec names without payloads: segments, campaign to a
// segment, batch send, connector send. Their limits are per company, and two
// of them allow one request per 10 s or per minute: most cases below take a
// company of their own.

var slugs atomic.Int64

// fresh provisions a company of its own (its own rate-limit buckets).
func (g *gw) fresh() tenant {
	return g.provision("co-" + strconv.FormatInt(slugs.Add(1), 10))
}

// state is what a refused request must leave as it was.
type state struct {
	segments, members, contacts, batches int
	stream                               uint64
}

func (g *gw) state() state {
	g.t.Helper()
	var s state
	if err := g.pool.QueryRow(context.Background(), `
		SELECT (SELECT count(*) FROM segments), (SELECT count(*) FROM segment_members),
			(SELECT count(*) FROM contacts), (SELECT count(*) FROM batches)`).Scan(&s.segments, &s.members, &s.contacts, &s.batches); err != nil {
		g.t.Fatal(err)
	}
	s.stream = g.streamCount()
	return s
}

// recorded waits until the gateway has written an accepted batch's row (in
// the background), so that a later snapshot does not see it arrive.
// pending fails unless GET /api/batches/{id} knows the batch, from the
// stream, before any dispatcher took it.
func (g *gw) pending(key, batchID string, contacts int) {
	g.t.Helper()
	r := g.do(http.MethodGet, "/api/batches/"+batchID, key, nil)
	if r.status != 200 {
		g.t.Fatalf("batch %s: %d %s", batchID, r.status, r.body)
	}
	if b := r.json(g.t); b["status"] != "accepted" || b["contacts"] != float64(contacts) {
		g.t.Fatalf("batch %s: %s", batchID, r.body)
	}
}

// unchanged fails when a refused request changed the database or the
// stream.
func (g *gw) unchanged(before state, what string) {
	g.t.Helper()
	if after := g.state(); after != before {
		g.t.Fatalf("%s changed something: before %+v, after %+v", what, before, after)
	}
}

func segmentBody(name string, contacts ...string) string {
	return fmt.Sprintf(`{"name":%q,"contacts":[%s]}`, name, strings.Join(contacts, ","))
}

func TestSegmentCreate(t *testing.T) {
	g := newGateway(t, gwOptions{})
	ctx := context.Background()
	co := g.fresh()
	book := contacts.NewStore(g.pool, nil)
	if _, err := book.Upsert(ctx, co.company.ID, []contacts.Upsert{{Phone: "+393330000001", LastName: ptr("Kept"),
		Variables: map[string]string{"tier": "silver", "city": "Rome"}}}); err != nil {
		t.Fatal(err)
	}

	r := g.post("/api/segments/create", co.key, segmentBody(" \tVIP customers\u00a0 ",
		`{"phone":"393330000001","first_name":"Ana","variables":{"tier":"gold"}}`,
		`{"phone":"+14155550100","last_name":"Lee","image_url":"ignored, not validated"}`,
		`{"phone":"+14155550100"}`))
	if r.status != http.StatusCreated {
		t.Fatalf("%d %s", r.status, r.body)
	}
	seg := r.json(t)
	id := int64(seg["id"].(float64))
	created, err := time.Parse(time.RFC3339Nano, seg["created_at"].(string))
	if id == 0 || seg["name"] != "VIP customers" || seg["contacts"] != float64(2) || err != nil ||
		!created.Equal(g.clock.now().Truncate(time.Microsecond)) || len(seg) != 4 {
		t.Fatalf("201 body %s (created_at: %v)", r.body, err)
	}
	c, err := book.ByPhone(ctx, co.company.ID, "+393330000001")
	if err != nil || c.FirstName != "Ana" || c.LastName != "Kept" || c.Variables["tier"] != "gold" || c.Variables["city"] != "Rome" {
		t.Fatalf("existing contact merged as a trigger merges: %+v %v", c, err)
	}
	if c, err := book.ByPhone(ctx, co.company.ID, "+14155550100"); err != nil || c.LastName != "Lee" {
		t.Fatalf("unknown contact created: %+v %v", c, err)
	}

	// A taken name is 409 naming the segment that has it; nothing changes.
	before := g.state()
	r = g.post("/api/segments/create", co.key, segmentBody("VIP customers", `{"phone":"+14155550199"}`))
	wantBody(t, r, http.StatusConflict, fmt.Sprintf(`{"detail":"A segment named \"VIP customers\" already exists: segment %d","segment_id":%d}`, id, id))
	g.unchanged(before, "a taken name")

	// Schema errors are pydantic's, before anything else; nothing changes.
	r = g.post("/api/segments/create", co.key, `{"name":"  ","contacts":[{"phone":"1"}]}`)
	wantBody(t, r, 422, `{"detail":[{"type":"string_too_short","loc":["body","name"],"msg":"String should have at least 1 character","input":"  ","ctx":{"min_length":1}},`+
		`{"type":"string_pattern_mismatch","loc":["body","contacts",0,"phone"],"msg":"String should match pattern '^\\+?[1-9]\\d{6,14}$'","input":"1","ctx":{"pattern":"^\\+?[1-9]\\d{6,14}$"}}]}`)
	g.unchanged(before, "an invalid body")

	// An Idempotency-Key replays the 201 and creates nothing more.
	first := g.post("/api/segments/create", co.key, segmentBody("Leads"), "Idempotency-Key", "seg-1")
	again := g.post("/api/segments/create", co.key, segmentBody("Leads"), "Idempotency-Key", "seg-1")
	if first.status != 201 || again.status != 201 || string(first.body) != string(again.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %s / %d %s", first.status, first.body, again.status, again.body)
	}
	var n int
	if err := g.pool.QueryRow(ctx, `SELECT count(*) FROM segments WHERE company_id = $1 AND name = 'Leads'`, co.company.ID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d segments named Leads (%v)", n, err)
	}
}

func TestSegmentMaximum(t *testing.T) {
	g := newGateway(t, gwOptions{})
	ctx := context.Background()
	co := g.fresh()
	two := 2
	if _, err := g.cat.UpdateCompany(ctx, co.company.ID, catalog.CompanyUpdate{MaxSegments: &two}); err != nil {
		t.Fatal(err)
	}
	if r := g.post("/api/segments/create", co.key, segmentBody("one")); r.status != 201 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	// Five concurrent creates for the last place: exactly one gets it.
	var wg sync.WaitGroup
	statuses := make(chan response, 5)
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses <- g.post("/api/segments/create", co.key, segmentBody(fmt.Sprintf("racer %d", i), fmt.Sprintf(`{"phone":"+3933300001%02d"}`, i)))
		}()
	}
	wg.Wait()
	close(statuses)
	got := map[int]int{}
	for r := range statuses {
		got[r.status]++
		if r.status == http.StatusConflict && string(r.body) != `{"detail":"Maximum number of segments reached: this workspace may have 2"}` {
			t.Fatalf("409 body %s", r.body)
		}
	}
	if got[201] != 1 || got[409] != 4 {
		t.Fatalf("statuses %v, want one 201 and four 409", got)
	}
	// The losers created no contact.
	var n int
	if err := g.pool.QueryRow(ctx, `SELECT count(*) FROM contacts WHERE company_id = $1`, co.company.ID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d contacts after one successful create of one contact (%v)", n, err)
	}
	// parleyctl companies update --max-segments writes the same column.
	three := 3
	if _, err := g.cat.UpdateCompany(ctx, co.company.ID, catalog.CompanyUpdate{MaxSegments: &three}); err != nil {
		t.Fatal(err)
	}
	if r := g.post("/api/segments/create", co.key, segmentBody("third")); r.status != 201 {
		t.Fatalf("after raising the maximum: %d %s", r.status, r.body)
	}
}

func createSegment(t *testing.T, g *gw, key, name string, contacts ...string) int64 {
	t.Helper()
	r := g.post("/api/segments/create", key, segmentBody(name, contacts...))
	if r.status != 201 {
		t.Fatalf("create segment: %d %s", r.status, r.body)
	}
	return int64(r.json(t)["id"].(float64))
}

func TestSegmentContacts(t *testing.T) {
	g := newGateway(t, gwOptions{})
	co := g.fresh()
	id := createSegment(t, g, co.key, "VIP", `{"phone":"+393330000001"}`)
	path := fmt.Sprintf("/api/segments/%d/contacts", id)

	// A member again, a new contact twice, another new one: two added.
	r := g.post(path, co.key, `{"contacts":[{"phone":"+393330000001","first_name":"Ana"},{"phone":"+393330000002"},{"phone":"393330000002"},{"phone":"+393330000003"}]}`)
	wantBody(t, r, 200, fmt.Sprintf(`{"segment_id":%d,"added":2,"contacts":3}`, id))
	if c, err := contacts.NewStore(g.pool, nil).ByPhone(context.Background(), co.company.ID, "+393330000001"); err != nil || c.FirstName != "Ana" {
		t.Fatalf("member updated: %+v %v", c, err)
	}
	// One request per minute: the next one is 429 with the spec's body.
	r = g.post(path, co.key, `{"contacts":[]}`)
	wantBody(t, r, 429, `{"error":"Rate limit exceeded: 1 per 1 minute"}`)

	// Unknown and another company's segment: 404, nothing changes.
	rival := g.fresh()
	before := g.state()
	wantBody(t, g.post(path, rival.key, `{"contacts":[{"phone":"+393330000009"}]}`), 404, `{"detail":"Segment not found"}`)
	other := g.fresh()
	wantBody(t, g.post("/api/segments/999999/contacts", other.key, `{"contacts":[{"phone":"+393330000009"}]}`), 404, `{"detail":"Segment not found"}`)
	g.unchanged(before, "a 404")

	// A segment_id that is not an integer: FastAPI's 422 for an int path
	// parameter, before the body's items.
	r = g.post("/api/segments/abc/contacts", g.fresh().key, `{"contacts":[{"phone":"1"}]}`)
	wantBody(t, r, 422, `{"detail":[{"type":"int_parsing","loc":["path","segment_id"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"abc"},`+
		`{"type":"string_pattern_mismatch","loc":["body","contacts",0,"phone"],"msg":"String should match pattern '^\\+?[1-9]\\d{6,14}$'","input":"1","ctx":{"pattern":"^\\+?[1-9]\\d{6,14}$"}}]}`)
	g.unchanged(before, "a 422")
}

func TestCampaignToSegment(t *testing.T) {
	g := newGateway(t, gwOptions{})
	co := g.fresh()
	id := createSegment(t, g, co.key, "VIP", `{"phone":"+393330000001"}`, `{"phone":"+393330000002"}`, `{"phone":"+393330000003"}`)
	r := g.post("/api/campaigns/send", co.key, fmt.Sprintf(`{"campaign_id":%d,"segment_id":%d,"is_forced":true}`, co.campaign.ID, id))
	if r.status != 202 || r.json(t)["contacts"] != float64(3) {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var b sendsv1.CampaignBatch
	g.sentBatch(co.company.ID, r, &b)
	if b.SegmentId != id || len(b.Phones) != 0 || b.CampaignId != co.campaign.ID || !b.IsForced || b.BatchId != r.json(t)["batch_id"] {
		t.Fatalf("published %v", &b)
	}
	if b.SegmentSize != 3 {
		t.Fatalf("segment size %d published, want 3", b.SegmentSize)
	}
	g.pending(co.key, b.BatchId, 3)

	before := g.state()
	rival := g.fresh()
	wantDetail(t, g.post("/api/campaigns/send", rival.key, fmt.Sprintf(`{"campaign_id":%d,"segment_id":%d}`, rival.campaign.ID, id)), 404, "Segment not found")
	wantDetail(t, g.post("/api/campaigns/send", co.key, fmt.Sprintf(`{"campaign_id":%d,"segment_id":999999}`, co.campaign.ID)), 404, "Segment not found")
	body := fmt.Sprintf(`{"campaign_id":%d,"contacts":["+393330000001"],"segment_id":%d}`, co.campaign.ID, id)
	wantBody(t, g.post("/api/campaigns/send", co.key, body), 422,
		`{"detail":[{"type":"contacts_and_segment","loc":["body"],"msg":"Give either contacts or segment_id, not both","input":`+body+`}]}`)
	wantBody(t, g.post("/api/campaigns/send", co.key, fmt.Sprintf(`{"campaign_id":%d}`, co.campaign.ID)), 422,
		fmt.Sprintf(`{"detail":[{"type":"missing","loc":["body","contacts"],"msg":"Field required","input":{"campaign_id":%d}}]}`, co.campaign.ID))
	g.unchanged(before, "refused campaign sends")
}

func TestBatchSend(t *testing.T) {
	g := newGateway(t, gwOptions{})
	co := g.fresh()
	body := fmt.Sprintf(`{"messages":[
		{"phone":"393330000001","campaign_id":%d,"first_name":"Ana","variables":{"order_id":"A-1"},"image_url":"https://cdn.example/a.png"},
		{"phone":"+14155550100","template_id":%d,"messaging_account_id":%d,"url":"https://x.example/1"},
		{"phone":"+393330000001","campaign_id":%d}],
		"scheduled_at":"2999-01-01T00:00:00Z"}`, co.campaign.ID, co.template.ID, co.account.ID, co.campaign.ID)
	// The third message repeats the first's number: one message, the first's.
	r := g.post("/api/batch/send", co.key, body)
	if r.status != 202 || r.json(t)["contacts"] != float64(2) {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var b sendsv1.MessageBatch
	g.sentBatch(co.company.ID, r, &b)
	m := b.Messages
	if b.BatchId != r.json(t)["batch_id"] || b.Source != "api:batch_send" || b.IsForced ||
		b.ScheduledAt == nil || len(m) != 2 || m[0].Phone != "+393330000001" || m[0].GetFirstName() != "Ana" ||
		m[0].Variables["order_id"] != "A-1" || m[0].ImageUrl != "https://cdn.example/a.png" || m[0].CampaignId != co.campaign.ID ||
		m[1].TemplateId != co.template.ID || m[1].MessagingAccountId != co.account.ID || m[1].CampaignId != 0 || m[1].Url != "https://x.example/1" ||
		m[1].FirstName != nil {
		t.Fatalf("published %v", &b)
	}
	wantBody(t, g.post("/api/batch/send", co.key, body), 429, `{"error":"Rate limit exceeded: 1 per 10 second"}`)
	g.pending(co.key, b.BatchId, 2)

	// Every record a message names must be the company's: 404 naming the
	// first message that names an unknown one. Nothing changes.
	rival := g.fresh()
	a, b2, c := g.fresh(), g.fresh(), g.fresh()
	before := g.state()
	for _, tc := range []struct {
		key, messages, detail string
	}{
		{a.key, fmt.Sprintf(`[{"phone":"+393330000001","campaign_id":%d},{"phone":"+393330000002","campaign_id":%d}]`, a.campaign.ID, rival.campaign.ID),
			"Campaign not found: messages[1].campaign_id"},
		{b2.key, fmt.Sprintf(`[{"phone":"+393330000001","template_id":%d,"messaging_account_id":%d}]`, rival.template.ID, b2.account.ID),
			"Template not found: messages[0].template_id"},
		{c.key, fmt.Sprintf(`[{"phone":"+393330000001","template_id":%d,"messaging_account_id":99999999}]`, c.template.ID),
			"Messaging account not found: messages[0].messaging_account_id"},
	} {
		wantDetail(t, g.post("/api/batch/send", tc.key, `{"messages":`+tc.messages+`}`), 404, tc.detail)
	}
	g.unchanged(before, "404 batch sends")
}

func TestBatchSendRefusals(t *testing.T) {
	g := newGateway(t, gwOptions{})
	ctx := context.Background()
	co := g.fresh()
	before := g.state()
	// Exactly one target per message.
	wantBody(t, g.post("/api/batch/send", co.key, `{"messages":[{"phone":"+393330000001","template_id":1}]}`), 422,
		`{"detail":[{"type":"batch_message_target","loc":["body","messages",0],"msg":"Give campaign_id, or template_id and messaging_account_id","input":{"phone":"+393330000001","template_id":1}}]}`)
	// A disconnected account named directly is a 422 at its field.
	off := false
	if _, err := g.cat.UpdateMessagingAccount(ctx, co.account.ID, catalog.AccountUpdate{Connected: &off}); err != nil {
		t.Fatal(err)
	}
	other := g.provision("disconnected")
	if _, err := g.cat.UpdateMessagingAccount(ctx, other.account.ID, catalog.AccountUpdate{Connected: &off}); err != nil {
		t.Fatal(err)
	}
	wantBody(t, g.post("/api/batch/send", other.key, fmt.Sprintf(`{"messages":[{"phone":"+393330000001","template_id":%d,"messaging_account_id":%d}]}`, other.template.ID, other.account.ID)), 422,
		fmt.Sprintf(`{"detail":[{"type":"messaging_account_disconnected","loc":["body","messages",0,"messaging_account_id"],"msg":"Messaging account %d is not connected","input":%d}]}`, other.account.ID, other.account.ID))
	g.unchanged(before, "422 batch sends")
}

func TestConnectorSend(t *testing.T) {
	g := newGateway(t, gwOptions{})
	ctx := context.Background()
	trigger := `{"contacts":[{"phone":"+393330000001","first_name":"Ana","variables":{"order_id":"A-1"}},{"phone":"+393330000002","variables":{"order_id":"B-2"},"image_url":"https://cdn.example/b.png"},{"phone":"393330000001","last_name":"Lima"}],"url":"https://shop.example/o/1"}`
	connector := func(co tenant, name string, connected bool, automation, campaign *int64) {
		t.Helper()
		if _, err := g.cat.CreateConnector(ctx, catalog.NewConnector{CompanyID: co.company.ID, Name: name, Connected: connected,
			TargetAutomationID: automation, TargetCampaignID: campaign}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("automation target", func(t *testing.T) {
		co := g.fresh()
		connector(co, "shopify", true, &co.automation.ID, nil)
		// The third entry repeats the first phone and lacks order_id: the
		// trigger's rules apply, so it is a 422 like the trigger's.
		r := g.post("/api/shopify/send", co.key, trigger)
		if r.status != 422 || !strings.Contains(string(r.body), `"loc":["body","contacts",2,"variables","order_id"]`) {
			t.Fatalf("%d %s", r.status, r.body)
		}
		// The rate limit is taken by that request: another company.
		co2 := g.fresh()
		connector(co2, "shopify", true, &co2.automation.ID, nil)
		ok := strings.Replace(trigger, `"last_name":"Lima"`, `"last_name":"Lima","variables":{"order_id":"A-2"}`, 1)
		r = g.post("/api/shopify/send", co2.key, ok)
		if r.status != 202 || r.json(t)["contacts"] != float64(2) { // the third entry repeats the first's number
			t.Fatalf("%d %s", r.status, r.body)
		}
		var b sendsv1.AutomationBatch
		g.sentBatch(co2.company.ID, r, &b)
		if b.AutomationId != co2.automation.ID || b.Source != "connector:shopify" || len(b.Contacts) != 2 || b.Contacts[0].GetLastName() != "" || b.Url != "https://shop.example/o/1" {
			t.Fatalf("published %v", &b)
		}
		wantBody(t, g.post("/api/shopify/send", co2.key, ok), 429, `{"error":"Rate limit exceeded: 1 per 10 second"}`)
	})

	t.Run("campaign target", func(t *testing.T) {
		co := g.fresh()
		connector(co, "klaviyo", true, nil, &co.campaign.ID)
		r := g.post("/api/klaviyo/send", co.key, trigger)
		if r.status != 202 || r.json(t)["contacts"] != float64(2) {
			t.Fatalf("%d %s", r.status, r.body)
		}
		var b sendsv1.MessageBatch
		g.sentBatch(co.company.ID, r, &b)
		m := b.Messages
		if b.Source != "connector:klaviyo" || b.IsForced || len(m) != 2 || m[0].CampaignId != co.campaign.ID ||
			m[0].GetFirstName() != "Ana" || m[0].GetLastName() != "" || // the repeat's last name is dropped with it m[0].Url != "https://shop.example/o/1" ||
			m[1].ImageUrl != "https://cdn.example/b.png" || m[1].Variables["order_id"] != "B-2" {
			t.Fatalf("published %v", &b)
		}
	})

	t.Run("refused", func(t *testing.T) {
		before := g.state()
		co := g.fresh()
		connector(co, "off", false, &co.automation.ID, nil)
		wantBody(t, g.post("/api/off/send", co.key, trigger), 404, `{"detail":"Connector not connected"}`)
		wantBody(t, g.post("/api/nothing-here/send", g.fresh().key, trigger), 404, `{"detail":"Connector not connected"}`)
		// Another company's connector is not this company's.
		wantBody(t, g.post("/api/off/send", g.fresh().key, trigger), 404, `{"detail":"Connector not connected"}`)
		bare := g.fresh()
		connector(bare, "bare", true, nil, nil)
		wantBody(t, g.post("/api/bare/send", bare.key, trigger), 422,
			`{"detail":[{"type":"connector_target_missing","loc":["path","connector"],"msg":"Connector bare has no target automation or campaign","input":"bare"}]}`)
		idle := g.fresh()
		inactive, err := g.cat.CreateAutomation(ctx, catalog.NewAutomation{CompanyID: idle.company.ID, Name: "idle",
			TemplateID: &idle.template.ID, MessagingAccountID: &idle.account.ID})
		if err != nil {
			t.Fatal(err)
		}
		connector(idle, "idle", true, &inactive.ID, nil)
		wantBody(t, g.post("/api/idle/send", idle.key, trigger), 422,
			fmt.Sprintf(`{"detail":[{"type":"connector_target_inactive","loc":["path","connector"],"msg":"The target automation %d of connector idle is not active","input":"idle"}]}`, inactive.ID))
		// The schema comes first, as for the trigger.
		r := g.post("/api/nothing-here/send", g.fresh().key, `{"contacts":[{"phone":"1"}]}`)
		if r.status != 422 || !strings.Contains(string(r.body), "string_pattern_mismatch") {
			t.Fatalf("%d %s", r.status, r.body)
		}
		// Connectors created above are configuration, not sends: compare the rest.
		after := g.state()
		if after.segments != before.segments || after.members != before.members || after.contacts != before.contacts ||
			after.stream != before.stream {
			t.Fatalf("refused connector sends changed something: %+v -> %+v", before, after)
		}
	})
}

// TestStaticRoutesWin: gin serves /api/campaigns/send, /api/automations/send,
// /api/batch/send and /api/segments/create with their own handlers and limits
// next to /api/{connector}/send, and a connector can never take those names.
func TestStaticRoutesWin(t *testing.T) {
	g := newGateway(t, gwOptions{})
	co := g.fresh()
	for _, name := range []string{"campaigns", "automations", "batch", "batches", "segments", "docs"} {
		if _, err := g.cat.CreateConnector(context.Background(), catalog.NewConnector{CompanyID: co.company.ID, Name: name, Connected: true,
			TargetCampaignID: &co.campaign.ID}); err == nil {
			t.Fatalf("connector %q was created", name)
		}
	}
	// Each static route answers its own schema's 422 for an empty object.
	for path, field := range map[string]string{
		"/api/campaigns/send":   "campaign_id",
		"/api/automations/send": "automation_id",
		"/api/batch/send":       "messages",
		"/api/segments/create":  "name",
	} {
		r := g.post(path, co.key, `{}`)
		if r.status != 422 || !strings.Contains(string(r.body), `"loc":["body","`+field+`"]`) {
			t.Fatalf("%s: %d %s", path, r.status, r.body)
		}
	}
	// The connector route has its own limit: the batch send above did not take it.
	if r := g.post("/api/shopify/send", co.key, `{"contacts":[]}`); r.status != 404 {
		t.Fatalf("connector after the static routes: %d %s", r.status, r.body)
	}
	// A reserved name under the connector route is no connector: since
	// POST /api/batches/{batch_id}/cancel, /api/batches/send is the path of
	// a batch (GET only), so the POST is 405, not a connector's answer.
	if r := g.post("/api/batches/send", g.fresh().key, `{"contacts":[]}`); r.status != 405 {
		t.Fatalf("/api/batches/send: %d %s", r.status, r.body)
	}
}

func ptr(s string) *string { return &s }

// resetLimit empties a company's bucket of a route in Redis (the limiter
// keeps it at <prefix>rate:req:{c:<company>}:<route>), so that a test can
// send again at once.
func (g *gw) resetLimit(route string, companyID int64) {
	g.t.Helper()
	key := g.redis.RequestKey(ratelimit.CompanyKey(companyID, route))
	n, err := redisClient(g.t, g).Del(context.Background(), key).Result()
	if err != nil || n != 1 {
		g.t.Fatalf("reset limit %s: %d %v", key, n, err)
	}
}

// TestIdempotencyKeyIsPerEndpointAsCalled: the same key and body sent to two
// segments (or two connectors) are two requests, not a replay of the first.
func TestIdempotencyKeyIsPerEndpointAsCalled(t *testing.T) {
	g := newGateway(t, gwOptions{})
	co := g.fresh()
	a := createSegment(t, g, co.key, "A")
	b := createSegment(t, g, co.key, "B")
	body := `{"contacts":[{"phone":"+393330000001"}]}`
	send := func(id int64) response {
		return g.post(fmt.Sprintf("/api/segments/%d/contacts", id), co.key, body, "Idempotency-Key", "same")
	}
	wantBody(t, send(a), 200, fmt.Sprintf(`{"segment_id":%d,"added":1,"contacts":1}`, a))
	g.resetLimit("segment_contacts", co.company.ID)
	rb := send(b)
	wantBody(t, rb, 200, fmt.Sprintf(`{"segment_id":%d,"added":1,"contacts":1}`, b))
	if rb.header.Get("Idempotent-Replayed") != "" {
		t.Fatal("the second segment got the first one's answer")
	}
	g.resetLimit("segment_contacts", co.company.ID)
	ra := send(a)
	wantBody(t, ra, 200, fmt.Sprintf(`{"segment_id":%d,"added":1,"contacts":1}`, a))
	if ra.header.Get("Idempotent-Replayed") != "true" {
		t.Fatal("the same request again was not replayed")
	}

	for _, name := range []string{"one", "two"} {
		if _, err := g.cat.CreateConnector(context.Background(), catalog.NewConnector{CompanyID: co.company.ID, Name: name,
			Connected: true, TargetCampaignID: &co.campaign.ID}); err != nil {
			t.Fatal(err)
		}
	}
	first := g.post("/api/one/send", co.key, body, "Idempotency-Key", "k")
	g.resetLimit("connector_send", co.company.ID)
	second := g.post("/api/two/send", co.key, body, "Idempotency-Key", "k")
	if first.status != 202 || second.status != 202 || first.json(t)["batch_id"] == second.json(t)["batch_id"] {
		t.Fatalf("two connectors, one key: %s / %s", first.body, second.body)
	}
}
