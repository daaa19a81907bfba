package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/delivery"
	"github.com/parleyhq/parley/pkg/record"
)

// conversationFixture is a company with two numbers and a template, and
// contacts who wrote to them.
type conversationFixture struct {
	s         *stack
	companyID int64
	support   catalog.MessagingAccount
	sales     catalog.MessagingAccount
	template  catalog.Template
	js        jetstream.JetStream
	stream    jetstream.Stream
}

func newConversationFixture(t *testing.T) *conversationFixture {
	t.Helper()
	ctx := context.Background()
	s := newStack(t)
	f := &conversationFixture{s: s, companyID: s.company("acme")}
	cat := catalog.NewStore(s.pool, mustBox(t))
	var err error
	if f.support, err = cat.CreateMessagingAccount(ctx, catalog.NewMessagingAccount{CompanyID: f.companyID, Name: "Acme Support",
		PhoneNumberID: "15550001001", AccessToken: "t1", Connected: true}); err != nil {
		t.Fatal(err)
	}
	if f.sales, err = cat.CreateMessagingAccount(ctx, catalog.NewMessagingAccount{CompanyID: f.companyID, Name: "Acme Sales",
		PhoneNumberID: "15550001002", AccessToken: "t2", Connected: true}); err != nil {
		t.Fatal(err)
	}
	if f.template, err = cat.CreateTemplate(ctx, catalog.NewTemplate{CompanyID: f.companyID,
		Template: whatsapp.Template{Name: "order_update", Language: "en_US", HeaderKind: whatsapp.HeaderNone}}); err != nil {
		t.Fatal(err)
	}
	// The SENDS stream, as the gateway and the dispatchers create it.
	nc, err := bus.Connect(s.busCfg, "cli-test-conversations")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if f.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	if f.stream, err = bus.EnsureStream(ctx, f.js, s.busCfg); err != nil {
		t.Fatal(err)
	}
	return f
}

// receive records a text a contact sent to a number at a time.
func (f *conversationFixture) receive(from, profile string, to catalog.MessagingAccount, text string, at time.Time) {
	f.s.t.Helper()
	wamid := fmt.Sprintf("wamid.%s.%d", strings.TrimPrefix(from, "+"), at.UnixNano())
	_, err := record.Receive(context.Background(), f.s.pool, []whatsapp.InboundMessage{{
		PhoneNumberID: to.PhoneNumberID, ID: wamid, From: from, Timestamp: at, Type: "text", Text: text, ProfileName: profile,
		Content: whatsapp.InboundContent{Type: "text", Text: &whatsapp.InboundText{Body: text}},
	}}, time.Now())
	if err != nil {
		f.s.t.Fatal(err)
	}
}

// takeReplies does what the automation dispatcher does first with the
// replies waiting in the stream: records each as a queued message
// (delivery.Expander.Reply), then acks it. It returns them.
func (f *conversationFixture) takeReplies() []*sendsv1.ReplyBatch {
	f.s.t.Helper()
	t := f.s.t
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := f.stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "test-replies", FilterSubject: f.s.busCfg.ReplyFilter(),
		AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.FetchNoWait(100)
	if err != nil {
		t.Fatal(err)
	}
	var out []*sendsv1.ReplyBatch
	for m := range batch.Messages() {
		b := &sendsv1.ReplyBatch{}
		if err := proto.Unmarshal(m.Data(), b); err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
		if err := m.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// record records replies as the dispatcher's expansion does.
func (f *conversationFixture) record(bs []*sendsv1.ReplyBatch) {
	f.s.t.Helper()
	x := delivery.NewExpander(f.s.pool, catalog.NewStore(f.s.pool, mustBox(f.s.t)), time.Now)
	for _, b := range bs {
		if _, err := x.Reply(context.Background(), b); err != nil {
			f.s.t.Fatal(err)
		}
	}
}

// threadJSON is `conversations show --json`.
type threadJSON struct {
	Contact    *record.ContactView `json:"contact"`
	Phone      string              `json:"phone"`
	Messages   []record.Entry      `json:"messages"`
	NextCursor *string             `json:"next_cursor"`
}

func TestConversationsListAndShow(t *testing.T) {
	f := newConversationFixture(t)
	s := f.s
	now := time.Now()

	r := s.ok("conversations", "list", "--company", "acme")
	if !strings.Contains(r.stdout, "no conversations") {
		t.Fatalf("empty list: %q", r.stdout)
	}

	// A campaign message WhatsApp refused, before the contact wrote.
	campaignFailed(t, f, "+14155550101", now.Add(-2*time.Hour))
	f.receive("+14155550102", "Bob", f.sales, "Do you ship to Canada?", now.Add(-30*time.Hour))
	f.receive("+14155550101", "Jane", f.support, "Is my order shipped?", now.Add(-48*time.Minute))

	r = s.ok("conversations", "list", "--company", "acme")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "PHONE") {
		t.Fatalf("list:\n%s", r.stdout)
	}
	for _, want := range []string{"+14155550101", "Jane", "Acme Support", "Is my order shipped?", "open, ends in 23h1"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("the newest conversation's line %q lacks %q", lines[1], want)
		}
	}
	for _, want := range []string{"+14155550102", "Bob", "Acme Sales", "closed at "} {
		if !strings.Contains(lines[2], want) {
			t.Errorf("the older conversation's line %q lacks %q", lines[2], want)
		}
	}

	var page record.ConversationPage
	s.jsonOK(&page, "conversations", "list", "--company", "acme", "--limit", "1")
	if len(page.Conversations) != 1 || page.Conversations[0].Phone != "+14155550101" || !page.Conversations[0].Open ||
		page.Conversations[0].MessagingAccountName != "Acme Support" || page.NextCursor == nil {
		t.Fatalf("first page %+v", page)
	}
	s.jsonOK(&page, "conversations", "list", "--company", "acme", "--limit", "1", "--cursor", *page.NextCursor)
	if len(page.Conversations) != 1 || page.Conversations[0].Phone != "+14155550102" || page.Conversations[0].Open || page.NextCursor != nil {
		t.Fatalf("second page %+v", page)
	}
	s.fails(ExitUsage, "--cursor", "conversations", "list", "--company", "acme", "--cursor", "nonsense")
	s.fails(ExitUsage, "--limit must be 1 to 100", "conversations", "list", "--company", "acme", "--limit", "0")

	// A reply, recorded by the dispatcher.
	var acc replyView
	s.jsonOK(&acc, "conversations", "reply", "14155550101", "--company", "acme", "--text", "Yes, it left this morning.")
	f.record(f.takeReplies())

	r = s.ok("conversations", "show", "+14155550101", "--company", "acme")
	for _, want := range []string{"profile name:", "Jane", "opted out:", `"Acme Support": open, ends in 23h`, "oldest first"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("show lacks %q:\n%s", want, r.stdout)
		}
	}
	thread := r.stdout[strings.Index(r.stdout, "WHEN"):]
	rows := strings.Split(strings.TrimSpace(thread), "\n")[1:]
	if len(rows) != 3 {
		t.Fatalf("thread:\n%s", thread)
	}
	for i, want := range [][]string{
		{"→ out", `template "order_update" (en_US)`, `campaign "Spring sale"`, "failed: 131049 This message was not delivered"},
		{"← in", "Acme Support", "Is my order shipped?"},
		{"→ out", "Acme Support", "Yes, it left this morning.", "reply", "queued"},
	} {
		for _, w := range want {
			if !strings.Contains(rows[i], w) {
				t.Errorf("thread line %d %q lacks %q", i, rows[i], w)
			}
		}
	}

	var th threadJSON
	s.jsonOK(&th, "conversations", "show", "+14155550101", "--company", "acme")
	if th.Contact == nil || th.Contact.ProfileName != "Jane" || len(th.Contact.Windows) != 1 || !th.Contact.Windows[0].Open ||
		len(th.Messages) != 3 || th.Messages[0].Out == nil || th.Messages[0].Out.ID != acc.MessageID || th.Messages[1].In == nil {
		t.Fatalf("show --json: %+v", th)
	}
	s.jsonOK(&th, "conversations", "show", "+14155550101", "--company", "acme", "--limit", "2")
	if len(th.Messages) != 2 || th.NextCursor == nil {
		t.Fatalf("first page of the thread: %+v", th)
	}
	r = s.ok("conversations", "show", "+14155550101", "--company", "acme", "--limit", "2")
	if !strings.Contains(r.stdout, "older: parleyctl conversations show +14155550101 --company acme --limit 2 --cursor ") {
		t.Errorf("no command for older messages:\n%s", r.stdout)
	}

	s.fails(ExitFailure, `no conversation with +14155550199 in company "acme"`, "conversations", "show", "+14155550199", "--company", "acme")
	s.fails(ExitUsage, "is not a phone number", "conversations", "show", "call-me", "--company", "acme")
	s.company("globex")
	s.fails(ExitFailure, `no conversation with +14155550101 in company "globex"`, "conversations", "show", "+14155550101", "--company", "globex")
}

// campaignFailed writes a campaign message to phone that WhatsApp refused,
// as the campaign dispatcher leaves it.
func campaignFailed(t *testing.T, f *conversationFixture, phone string, at time.Time) {
	t.Helper()
	ctx := context.Background()
	var campaignID int64
	if err := f.s.pool.QueryRow(ctx, `INSERT INTO campaigns (company_id, name, template_id, messaging_account_id)
		VALUES ($1, 'Spring sale', $2, $3) RETURNING id`, f.companyID, f.template.ID, f.support.ID).Scan(&campaignID); err != nil {
		t.Fatal(err)
	}
	batchID := fmt.Sprintf("0197c2d4-8f7a-7b3e-9c1d-%012d", at.UnixMilli()%1e12)
	if _, err := f.s.pool.Exec(ctx, `INSERT INTO batches (id, company_id, kind, source, contact_count, status, accepted_at, completed_at, campaign_id)
		VALUES ($1, $2, 'campaign', 'api:campaigns_send', 1, 'completed', $3, $3, $4)`, batchID, f.companyID, at, campaignID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.pool.Exec(ctx, `INSERT INTO messages (batch_id, seq, company_id, phone, messaging_account_id, template_id, state,
			error_code, error_title, attempts, created_at, updated_at, failed_at)
		VALUES ($1, 0, $2, $3, $4, $5, 'failed', 131049,
			'This message was not delivered to maintain healthy ecosystem engagement', 1, $6, $6, $6)`,
		batchID, f.companyID, phone, f.support.ID, f.template.ID, at); err != nil {
		t.Fatal(err)
	}
}

func TestConversationsReply(t *testing.T) {
	f := newConversationFixture(t)
	s := f.s
	now := time.Now()
	f.receive("+14155550101", "Jane", f.support, "Is my order shipped?", now.Add(-time.Hour))
	f.receive("+14155550101", "Jane", f.sales, "And my invoice?", now.Add(-26*time.Hour))
	f.receive("+14155550102", "Bob", f.sales, "Do you ship to Canada?", now.Add(-30*time.Hour))

	// A text inside the window, from the number the contact wrote to last.
	r := s.ok("conversations", "reply", "+14155550101", "--company", "acme", "--text", "Yes, it left this morning.")
	if !strings.Contains(r.stdout, "reply to +14155550101 accepted: message ") {
		t.Fatalf("reply printed %q", r.stdout)
	}
	var acc replyView
	s.jsonOK(&acc, "conversations", "reply", "+14155550101", "--company", "acme", "--from", "Acme Support", "--text", "Tracking: AC123")
	if acc.Status != "accepted" || acc.MessageID == 0 || acc.BatchID == "" {
		t.Fatalf("reply --json %+v", acc)
	}
	got := f.takeReplies()
	if len(got) != 2 {
		t.Fatalf("%d replies in the stream, want 2", len(got))
	}
	b := got[1]
	if b.GetBatchId() != acc.BatchID || b.GetMessageId() != acc.MessageID || b.GetPhone() != "+14155550101" ||
		b.GetMessagingAccountId() != f.support.ID || b.GetCompanyId() != f.companyID ||
		!strings.Contains(string(b.GetSession()), `"body":"Tracking: AC123"`) {
		t.Fatalf("reply in the stream %v", b)
	}

	// The window with the other number closed: the API's sentence, exit 1,
	// nothing published.
	r = s.fails(ExitFailure, "The 24-hour customer service window with +14155550101 on \"Acme Sales\" ended at ",
		"conversations", "reply", "+14155550101", "--company", "acme", "--from", fmt.Sprint(f.sales.ID), "--text", "Hello?")
	if !strings.Contains(r.stderr, "only a template message can be sent until the contact writes again") {
		t.Errorf("stderr %q", r.stderr)
	}
	s.fails(ExitFailure, "ended at", "conversations", "reply", "+14155550102", "--company", "acme", "--text", "Yes we do")
	s.fails(ExitFailure, "has never written to", "conversations", "reply", "+14155550199", "--company", "acme", "--text", "Hi")
	if n := len(f.takeReplies()); n != 0 {
		t.Fatalf("%d refused replies reached the stream", n)
	}

	// A template goes at any time.
	s.jsonOK(&acc, "conversations", "reply", "+14155550102", "--company", "acme", "--template", "order_update",
		"--language", "en_US", "--var", "order_id=A-1001", "--var", "note=a=b")
	got = f.takeReplies()
	if len(got) != 1 || got[0].GetTemplateId() != f.template.ID || got[0].GetVariables()["order_id"] != "A-1001" ||
		got[0].GetVariables()["note"] != "a=b" || len(got[0].GetSession()) != 0 || got[0].GetMessagingAccountId() != f.sales.ID {
		t.Fatalf("template reply in the stream %v", got)
	}
	s.fails(ExitFailure, `has no template "welcome"`, "conversations", "reply", "+14155550102", "--company", "acme", "--template", "welcome")

	// Usage mistakes change nothing.
	for _, c := range []struct {
		want string
		args []string
	}{
		{"give --text or --template", nil},
		{"give --text or --template", []string{"--text", "a", "--template", "order_update"}},
		{"--language and --var go with --template", []string{"--text", "a", "--var", "a=b"}},
		{"--text: String should have at least 1 character", []string{"--text", ""}},
		{"--text: Value error, must not be blank", []string{"--text", "   "}},
		{"--text: String should have at most 4096 characters", []string{"--text", strings.Repeat("é", 4097)}},
		{"--template \"Order\"", []string{"--template", "Order"}},
		{"--var \"order_id\": write name=value", []string{"--template", "order_update", "--var", "order_id"}},
	} {
		s.fails(ExitUsage, c.want, append([]string{"conversations", "reply", "+14155550101", "--company", "acme"}, c.args...)...)
	}
	s.ok("conversations", "reply", "+14155550101", "--company", "acme", "--text", strings.Repeat("é", 4096))
	s.fails(ExitFailure, `no messaging account named "Nope"`, "conversations", "reply", "+14155550101", "--company", "acme", "--from", "Nope", "--text", "x")
	s.fails(ExitFailure, `has no messaging account 999999`, "conversations", "reply", "+14155550101", "--company", "acme", "--from", "999999", "--text", "x")
	if n := len(f.takeReplies()); n != 1 {
		t.Fatalf("%d replies in the stream, want only the 4,096-character one", n)
	}

	// Another company's contact has no conversation with it.
	s.company("globex")
	s.fails(ExitFailure, "has never written to", "conversations", "reply", "+14155550101", "--company", "globex", "--text", "Hi")
}
