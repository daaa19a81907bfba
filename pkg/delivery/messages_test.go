package delivery

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/record"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/contacts"
)

func (f *fixture) messageBatch(forced bool, at *time.Time, msgs ...*sendsv1.BatchMessage) *sendsv1.MessageBatch {
	b := &sendsv1.MessageBatch{BatchId: newBatchID(f.t), CompanyId: f.company.ID, Messages: msgs, IsForced: forced,
		AcceptedAt: timestamppb.New(f.clock.Now()), Source: "api:batch_send"}
	if at != nil {
		b.ScheduledAt = timestamppb.New(*at)
	}
	return b
}

func TestExpandMessages(t *testing.T) {
	f := newFixture(t)
	x := NewExpander(f.pool, f.cat, f.clock.Now)
	ph := phones(3)
	cs := contacts.NewStore(f.pool, f.clock.Now)
	known, err := cs.Upsert(f.ctx, f.company.ID, []contacts.Upsert{{Phone: ph[0], FirstName: ptr("Stored")}})
	if err != nil {
		t.Fatal(err)
	}
	// A second account and template, named directly.
	acct2 := f.newAccount(f.company.ID, nil, "UTC", 100)
	tpl2 := f.newTemplate(f.company.ID, whatsapp.Template{Name: "receipt", Language: "en_US"})
	b := f.messageBatch(false, nil,
		&sendsv1.BatchMessage{Phone: ph[0], CampaignId: f.camp.ID, FirstName: ptr("Ana"), Variables: map[string]string{"order": "A-1"},
			ImageUrl: "https://cdn.example/i.png", Url: "https://x.example/1"},
		&sendsv1.BatchMessage{Phone: ph[1][1:], TemplateId: tpl2.ID, MessagingAccountId: acct2.ID, Url2: "https://x.example/2"},
		&sendsv1.BatchMessage{Phone: ph[2], CampaignId: f.camp.ID},
		// A number again (the gateway removes these): its first entry is sent, once.
		&sendsv1.BatchMessage{Phone: ph[0][1:], CampaignId: f.camp.ID, FirstName: ptr("Later")},
	)
	exp, err := x.Messages(f.ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if exp.Result != ResultExpanded || exp.Messages != 3 || !exp.Due || exp.AccountID != f.acct.ID ||
		len(exp.MoreAccounts) != 1 || exp.MoreAccounts[0] != acct2.ID {
		t.Fatalf("expansion = %+v", exp)
	}
	msgs := f.messages(b.BatchId)
	if len(msgs) != 3 || msgs[0].Phone != ph[0] || msgs[1].Phone != ph[1] || msgs[2].Phone != ph[2] {
		t.Fatalf("messages = %+v", msgs)
	}
	for _, m := range msgs {
		if m.State != record.StateQueued || m.Bypass {
			t.Fatalf("message = %+v (campaign rules apply unless forced)", m)
		}
	}
	if msgs[0].ContactID == nil || *msgs[0].ContactID != known[ph[0]].ID || msgs[1].ContactID != nil {
		t.Fatalf("contacts: %v %v", msgs[0].ContactID, msgs[1].ContactID)
	}
	if _, err := cs.ByPhone(f.ctx, f.company.ID, ph[1]); !errors.Is(err, contacts.ErrNotFound) {
		t.Fatalf("a batch send created a contact: %v", err)
	}
	if c, _ := cs.ByPhone(f.ctx, f.company.ID, ph[0]); c.FirstName != "Stored" {
		t.Fatalf("a batch send changed a contact: %+v", c)
	}
	var ov record.Overrides
	if err := json.Unmarshal(msgs[0].Overrides, &ov); err != nil {
		t.Fatal(err)
	}
	if ov.FirstName != "Ana" || ov.Variables["order"] != "A-1" || ov.ImageURL != "https://cdn.example/i.png" || ov.URL != "https://x.example/1" {
		t.Fatalf("overrides = %+v", ov)
	}
	if msgs[2].Overrides != nil {
		t.Fatalf("a message without personalisation has overrides %s", msgs[2].Overrides)
	}
	var acctOf, tplOf []int64
	rows, err := f.pool.Query(f.ctx, `SELECT messaging_account_id, template_id FROM messages WHERE batch_id = $1 ORDER BY seq`, b.BatchId)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var a, tp int64
		if err := rows.Scan(&a, &tp); err != nil {
			t.Fatal(err)
		}
		acctOf, tplOf = append(acctOf, a), append(tplOf, tp)
	}
	if acctOf[0] != f.acct.ID || tplOf[0] != f.tpl.ID || acctOf[1] != acct2.ID || tplOf[1] != tpl2.ID {
		t.Fatalf("accounts %v templates %v", acctOf, tplOf)
	}
	got := f.batch(b.BatchId)
	if got.Kind != "batch" || got.Status != record.BatchProcessing || got.ContactCount != 3 || got.IsForced {
		t.Fatalf("batch = %+v", got)
	}
	if again, err := x.Messages(f.ctx, b); err != nil || again.Result != ResultRedelivered {
		t.Fatalf("redelivery = %+v, %v", again, err)
	}
	if n := len(f.messages(b.BatchId)); n != 3 {
		t.Fatalf("after redelivery: %d messages", n)
	}
}

func TestExpandMessagesScheduledForcedAndFailures(t *testing.T) {
	f := newFixture(t)
	x := NewExpander(f.pool, f.cat, f.clock.Now)
	at := f.clock.Now().Add(time.Hour)
	ph := phones(4)
	other := f.newCompany("other")
	foreignTpl := f.newTemplate(other.ID, whatsapp.Template{Name: "theirs", Language: "en_US"})
	off := f.newAccount(f.company.ID, nil, "UTC", 10)
	if _, err := f.cat.UpdateMessagingAccount(f.ctx, off.ID, catalog.AccountUpdate{Connected: ptr(false)}); err != nil {
		t.Fatal(err)
	}
	b := f.messageBatch(true, &at,
		&sendsv1.BatchMessage{Phone: ph[0], CampaignId: f.camp.ID},
		&sendsv1.BatchMessage{Phone: ph[1], CampaignId: f.camp.ID + 1000},
		&sendsv1.BatchMessage{Phone: ph[2], TemplateId: foreignTpl.ID, MessagingAccountId: f.acct.ID},
		&sendsv1.BatchMessage{Phone: ph[3], TemplateId: f.tpl.ID, MessagingAccountId: off.ID},
	)
	exp, err := x.Messages(f.ctx, b)
	if err != nil || exp.Result != ResultExpanded || exp.Messages != 4 || exp.Due {
		t.Fatalf("expansion = %+v, %v", exp, err)
	}
	msgs := f.messages(b.BatchId)
	if msgs[0].State != record.StateScheduled || !msgs[0].NotBefore.Equal(at) || !msgs[0].Bypass {
		t.Fatalf("message 0 = %+v", msgs[0])
	}
	for i, want := range map[int]string{1: "no longer exists", 2: "template", 3: "disconnected"} {
		m := msgs[i]
		if m.State != record.StateFailed || m.Title == nil || !strings.Contains(*m.Title, want) {
			t.Fatalf("message %d = %+v, want failed saying %q", i, m, want)
		}
	}
	if got := f.batch(b.BatchId); got.Status != record.BatchScheduled || got.Counts[record.StateFailed] != 3 || !got.IsForced {
		t.Fatalf("batch = %+v", got)
	}

	// Every message failed: the batch failed.
	all := f.messageBatch(false, nil, &sendsv1.BatchMessage{Phone: ph[0], CampaignId: f.camp.ID + 1000})
	if exp, err := x.Messages(f.ctx, all); err != nil || exp.Result != ResultFailed || exp.Due {
		t.Fatalf("all failed = %+v, %v", exp, err)
	}
	if got := f.batch(all.BatchId); got.Status != record.BatchFailed || got.Error == "" {
		t.Fatalf("batch = %+v", got)
	}
	empty := f.messageBatch(false, nil)
	if exp, err := x.Messages(f.ctx, empty); err != nil || exp.Messages != 0 {
		t.Fatalf("empty = %+v, %v", exp, err)
	}
	if got := f.batch(empty.BatchId); got.Status != record.BatchCompleted {
		t.Fatalf("empty batch = %+v", got)
	}
	var rej *RejectError
	bad := f.messageBatch(false, nil, &sendsv1.BatchMessage{Phone: "12", CampaignId: f.camp.ID})
	if _, err := x.Messages(f.ctx, bad); !errors.As(err, &rej) {
		t.Fatalf("bad phone: %v", err)
	}
}

// TestMessageBatchIsSentByTheCampaignDispatcher: a message batch on
// <prefix>.batch.<company> reaches the provider through the campaign
// dispatcher's second consumer, personalised per message, under campaign
// rules unless forced, on every account it names.
func TestMessageBatchIsSentByTheCampaignDispatcher(t *testing.T) {
	h := newHarness(t)
	h.clock.Run()
	acct2 := h.newAccount(h.company.ID, nil, "UTC", 500)
	h.serve(acct2.PhoneNumberID)
	h.start(record.LaneCampaign, testConfig())
	ph := phones(3)
	if _, err := contacts.NewStore(h.pool, h.clock.Now).SetOptedOut(h.ctx, h.company.ID, ph[2], true); err != nil {
		t.Fatal(err)
	}
	b := h.messageBatch(false, nil,
		&sendsv1.BatchMessage{Phone: ph[0], CampaignId: h.camp.ID, FirstName: ptr("Ana"), Variables: map[string]string{"order": "A-1"}},
		&sendsv1.BatchMessage{Phone: ph[1], TemplateId: h.tpl.ID, MessagingAccountId: acct2.ID, FirstName: ptr("Bo")},
		&sendsv1.BatchMessage{Phone: ph[2], CampaignId: h.camp.ID},
	)
	h.publish(b, "")
	got := h.waitBatch(b.BatchId, record.BatchCompleted, 10*time.Second)
	if got.Counts[record.StateSent] != 2 || got.Counts[record.StateSkippedOptOut] != 1 || got.Kind != "batch" {
		t.Fatalf("batch = %+v", got)
	}
	body := func(phone string) string {
		rcv := h.received(phone)
		if len(rcv) != 1 {
			t.Fatalf("%s: %d sends", phone, len(rcv))
		}
		var out []string
		for _, c := range rcv[0].Components {
			if c.Type == "body" {
				for _, p := range c.Parameters {
					out = append(out, p.Text)
				}
			}
		}
		return strings.Join(out, "|")
	}
	if got := body(ph[0]); got != "Ana|A-1" {
		t.Fatalf("message 0 body %q", got)
	}
	if got := body(ph[1]); got != "Bo|-" {
		t.Fatalf("message 1 body %q", got)
	}
	if rcv := h.received(ph[1]); rcv[0].PhoneNumberID != acct2.PhoneNumberID {
		t.Fatalf("message 1 went through %s, want %s", rcv[0].PhoneNumberID, acct2.PhoneNumberID)
	}
	forced := h.messageBatch(true, nil, &sendsv1.BatchMessage{Phone: ph[2], CampaignId: h.camp.ID})
	h.publish(forced, "")
	if got := h.waitBatch(forced.BatchId, record.BatchCompleted, 10*time.Second); got.Counts[record.StateSent] != 1 || h.sends(ph[2]) != 1 {
		t.Fatalf("forced batch = %+v", got)
	}

	// An undecodable message batch is kept and terminated like the others.
	if _, err := h.js.Publish(h.ctx, h.busCfg.BatchSubject(h.company.ID), []byte("\xff junk"), jetstream.WithMsgID("junk-batch")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "rejected message batch kept", func() bool {
		var n int
		err := h.pool.QueryRow(h.ctx, `SELECT count(*) FROM rejected_bus_messages WHERE msg_id = 'junk-batch'`).Scan(&n)
		return err == nil && n == 1
	})
}

func TestPublishedOnItsSubject(t *testing.T) {
	for _, tc := range []struct {
		subject string
		company int64
		batch   string
		want    bool
	}{
		{"sends.campaign.7", 7, "b1", true},
		{"sends.campaign.7.b1", 7, "b1", true},
		{"sends.campaign.7.b2", 7, "b1", false},
		{"sends.campaign.8.b1", 7, "b1", false},
	} {
		s, err := bus.ParseSubject(tc.subject)
		if err != nil {
			t.Fatal(err)
		}
		if got := publishedOnItsSubject(s, tc.company, tc.batch); got != tc.want {
			t.Errorf("%s, company %d, batch %s: %v", tc.subject, tc.company, tc.batch, got)
		}
	}
}
