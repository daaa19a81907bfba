package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/delivery"
	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/services/gateway/internal/sends"
)

// getBatch is GET /api/batches/{id}, which must answer 200.
func (g *gw) getBatch(key, id string) map[string]any {
	g.t.Helper()
	r := g.do(http.MethodGet, "/api/batches/"+id, key, nil)
	if r.status != 200 {
		g.t.Fatalf("batch %s: %d %s", id, r.status, r.body)
	}
	return r.json(g.t)
}

// expandBatch expands a batch waiting in the stream (in its group or
// alone) as a dispatcher does (the same expander, on the same database),
// leaving its stream copy in place.
func (g *gw) expandBatch(x *delivery.Expander, companyID int64, batchID string) {
	g.t.Helper()
	ctx := context.Background()
	s, err := g.js.Stream(ctx, g.busCfg.Stream)
	if err != nil {
		g.t.Fatal(err)
	}
	b, _, err := g.busCfg.FindBatch(ctx, s, companyID, batchID)
	if err != nil {
		g.t.Fatalf("batch %s not in the stream: %v", batchID, err)
	}
	switch m := b.(type) {
	case *sendsv1.CampaignBatch:
		_, err = x.Campaign(ctx, m)
	case *sendsv1.AutomationBatch:
		_, err = x.Automation(ctx, m)
	case *sendsv1.MessageBatch:
		_, err = x.Messages(ctx, m)
	case *sendsv1.ReplyBatch:
		_, err = x.Reply(ctx, m)
	}
	if err != nil {
		g.t.Fatalf("expand %s: %v", batchID, err)
	}
}

// TestPendingAndRecordedBatchesAgree: the two readers of a batch, the
// gateway's view of a batch still in the stream and the dispatcher that
// records it, report the same kind, source and contacts, for every kind of
// send and every way a source is written (canonical, by the gateway; empty or
// with the legacy spelling, by an older publisher; a connector's).
func TestPendingAndRecordedBatchesAgree(t *testing.T) {
	g := newGateway(t, gwOptions{})
	ctx := context.Background()
	box, err := secretbox.New(secretbox.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	x := delivery.NewExpander(g.pool, catalog.NewStore(g.pool, box), g.clock.now)

	type sent struct {
		co           tenant
		batchID      string
		subject      string
		kind, source string
		contacts     int
	}
	var cases []sent

	// Through the API, each naming a number twice (one company per send:
	// the batch and connector sends allow one request per 10 s).
	connector := func(co tenant, automation, campaign *int64) {
		if _, err := g.cat.CreateConnector(ctx, catalog.NewConnector{CompanyID: co.company.ID, Name: "shopify", Connected: true,
			TargetAutomationID: automation, TargetCampaignID: campaign}); err != nil {
			t.Fatal(err)
		}
	}
	trigger := `{"phone":"+393880000001","variables":{"order_id":"1"}},{"phone":"393880000001","variables":{"order_id":"2"}},{"phone":"+393880000002","variables":{"order_id":"3"}}`
	for _, api := range []struct {
		path, kind, source string
		subject            func(tenant) string
		body               func(tenant) string
		setup              func(tenant)
	}{
		{"/api/campaigns/send", "campaign", "api:campaigns_send", func(co tenant) string { return g.busCfg.CampaignSubject(co.company.ID) },
			func(co tenant) string {
				return campaignBody(co.campaign.ID, "+393880000001", "393880000001", "+393880000002")
			}, nil},
		{"/api/automations/send", "automation", "api:automations_send", func(co tenant) string { return g.busCfg.AutomationSubject(co.company.ID) },
			func(co tenant) string {
				return fmt.Sprintf(`{"automation_id":%d,"contacts":[%s]}`, co.automation.ID, trigger)
			}, nil},
		{"/api/batch/send", "batch", "api:batch_send", func(co tenant) string { return g.busCfg.BatchSubject(co.company.ID) },
			func(co tenant) string {
				return fmt.Sprintf(`{"messages":[{"phone":"+393880000001","campaign_id":%[1]d},{"phone":"393880000001","campaign_id":%[1]d},{"phone":"+393880000002","campaign_id":%[1]d}]}`, co.campaign.ID)
			}, nil},
		{"/api/shopify/send", "connector", "connector:shopify", func(co tenant) string { return g.busCfg.AutomationSubject(co.company.ID) },
			func(tenant) string { return `{"contacts":[` + trigger + `]}` },
			func(co tenant) { connector(co, &co.automation.ID, nil) }},
		{"/api/shopify/send", "connector", "connector:shopify", func(co tenant) string { return g.busCfg.BatchSubject(co.company.ID) },
			func(tenant) string { return `{"contacts":[` + trigger + `]}` },
			func(co tenant) { connector(co, nil, &co.campaign.ID) }},
	} {
		co := g.fresh()
		if api.setup != nil {
			api.setup(co)
		}
		r := g.post(api.path, co.key, api.body(co))
		if r.status != 202 || r.json(t)["contacts"] != float64(2) {
			t.Fatalf("%s: %d %s", api.path, r.status, r.body)
		}
		id := r.json(t)["batch_id"].(string)
		cases = append(cases, sent{co, id, bus.ForBatch(api.subject(co), id), api.kind, api.source, 2})
	}

	// As an older publisher wrote them: no source, or the legacy spelling.
	co := g.fresh()
	now := timestamppb.New(g.clock.now())
	for i, m := range []struct {
		msg          proto.Message
		subject      string
		kind, source string
	}{
		{&sendsv1.CampaignBatch{CampaignId: co.campaign.ID}, g.busCfg.CampaignSubject(co.company.ID), "campaign", "api:campaigns_send"},
		{&sendsv1.CampaignBatch{CampaignId: co.campaign.ID, Source: "api:campaigns/send"}, g.busCfg.CampaignSubject(co.company.ID), "campaign", "api:campaigns_send"},
		{&sendsv1.AutomationBatch{AutomationId: co.automation.ID}, g.busCfg.AutomationSubject(co.company.ID), "automation", "api:automations_send"},
		{&sendsv1.AutomationBatch{AutomationId: co.automation.ID, Source: "api:automations/send"}, g.busCfg.AutomationSubject(co.company.ID), "automation", "api:automations_send"},
		{&sendsv1.MessageBatch{}, g.busCfg.BatchSubject(co.company.ID), "batch", "api:batch_send"},
		{&sendsv1.MessageBatch{Source: "api:batch/send"}, g.busCfg.BatchSubject(co.company.ID), "batch", "api:batch_send"},
		{&sendsv1.ReplyBatch{}, g.busCfg.CompanySubject(bus.KindReplyBatches, co.company.ID), "reply", "api:messages_send"},
	} {
		id, err := sends.NewBatchID()
		if err != nil {
			t.Fatal(err)
		}
		p := fmt.Sprintf("+39389000%04d", i)
		switch b := m.msg.(type) {
		case *sendsv1.CampaignBatch:
			b.BatchId, b.CompanyId, b.Phones, b.AcceptedAt = id, co.company.ID, []string{p}, now
		case *sendsv1.AutomationBatch:
			b.BatchId, b.CompanyId, b.AcceptedAt = id, co.company.ID, now
			b.Contacts = []*sendsv1.AutomationContact{{Phone: p, Variables: map[string]string{"order_id": "1"}}}
		case *sendsv1.MessageBatch:
			b.BatchId, b.CompanyId, b.AcceptedAt = id, co.company.ID, now
			b.Messages = []*sendsv1.BatchMessage{{Phone: p, CampaignId: co.campaign.ID}}
		case *sendsv1.ReplyBatch:
			b.BatchId, b.CompanyId, b.AcceptedAt, b.Phone = id, co.company.ID, now, p
			b.MessagingAccountId, b.TemplateId = co.account.ID, co.template.ID
			if err := g.pool.QueryRow(ctx, `SELECT nextval('messages_id_seq')`).Scan(&b.MessageId); err != nil {
				t.Fatal(err)
			}
		}
		data, err := proto.Marshal(m.msg)
		if err != nil {
			t.Fatal(err)
		}
		subject := bus.ForBatch(m.subject, id)
		if _, err := g.js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: data}); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, sent{co, id, subject, m.kind, m.source, 1})
	}

	kinds := map[string]bool{}
	for _, c := range cases {
		pending := g.getBatch(c.co.key, c.batchID)
		if pending["status"] != "accepted" || pending["kind"] != c.kind || pending["source"] != c.source || pending["contacts"] != float64(c.contacts) {
			t.Fatalf("%s in the stream: %v, want kind %s, source %s, contacts %d", c.subject, pending, c.kind, c.source, c.contacts)
		}
		g.expandBatch(x, c.co.company.ID, c.batchID)
		recorded := g.getBatch(c.co.key, c.batchID)
		if recorded["status"] == "accepted" {
			t.Fatalf("%s was not recorded: %v", c.subject, recorded)
		}
		for _, field := range []string{"batch_id", "kind", "source", "contacts", "is_forced", "campaign_id", "automation_id", "segment_id"} {
			if fmt.Sprint(recorded[field]) != fmt.Sprint(pending[field]) {
				t.Errorf("%s: %s is %v in the stream, %v once recorded", c.subject, field, pending[field], recorded[field])
			}
		}
		kinds[c.kind] = true
	}
	for _, k := range bus.BatchKinds {
		if !kinds[string(k)] {
			t.Errorf("no case of kind %s", k)
		}
	}
}
