package main

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/delivery"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/pkg/secretbox"
)

// conversations is a company's numbers and the SENDS stream replies go to,
// for the Conversations pages' tests.
type conversationsFixture struct {
	e       *env
	cat     *catalog.Store
	support catalog.MessagingAccount
	sales   catalog.MessagingAccount
	stream  jetstream.Stream
}

func (e *env) conversations() *conversationsFixture {
	e.t.Helper()
	ctx := context.Background()
	box, err := secretbox.New(secretbox.DevKey)
	if err != nil {
		e.t.Fatal(err)
	}
	f := &conversationsFixture{e: e, cat: catalog.NewStore(e.Pool, box)}
	if f.support, err = f.cat.CreateMessagingAccount(ctx, catalog.NewMessagingAccount{CompanyID: e.CompanyID, Name: "Acme Support",
		PhoneNumberID: "15550002001", AccessToken: "t1", Connected: true}); err != nil {
		e.t.Fatal(err)
	}
	if f.sales, err = f.cat.CreateMessagingAccount(ctx, catalog.NewMessagingAccount{CompanyID: e.CompanyID, Name: "Acme Sales",
		PhoneNumberID: "15550002002", AccessToken: "t2", Connected: true}); err != nil {
		e.t.Fatal(err)
	}
	// The SENDS stream, as the gateway and the dispatchers create it.
	nc, err := nats.Connect(e.Bus.URL)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		e.t.Fatal(err)
	}
	if f.stream, err = bus.EnsureStream(ctx, js, e.Bus); err != nil {
		e.t.Fatal(err)
	}
	return f
}

// receive records a message a contact sent to one of the numbers.
func (f *conversationsFixture) receive(from, profile string, to catalog.MessagingAccount, content whatsapp.InboundContent, at time.Time) {
	f.e.t.Helper()
	m := whatsapp.InboundMessage{PhoneNumberID: to.PhoneNumberID, ID: fmt.Sprintf("wamid.%s.%d", strings.TrimPrefix(from, "+"), at.UnixNano()),
		From: from, Timestamp: at, Type: content.Type, ProfileName: profile, Content: content}
	if content.Text != nil {
		m.Text = content.Text.Body
	}
	if _, err := record.Receive(context.Background(), f.e.Pool, []whatsapp.InboundMessage{m}, f.e.Clock.Now()); err != nil {
		f.e.t.Fatal(err)
	}
}

func inboundText(body string) whatsapp.InboundContent {
	return whatsapp.InboundContent{Type: "text", Text: &whatsapp.InboundText{Body: body}}
}

// takeReplies does what the automation dispatcher does first with the
// replies waiting in the stream: records each as a queued message
// (delivery.Expander.Reply), then acks it; it returns them.
func (f *conversationsFixture) takeReplies() []*sendsv1.ReplyBatch {
	f.e.t.Helper()
	t := f.e.t
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := f.stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "test-replies",
		FilterSubject: f.e.Bus.ReplyFilter(), AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.FetchNoWait(100)
	if err != nil {
		t.Fatal(err)
	}
	x := delivery.NewExpander(f.e.Pool, f.cat, f.e.Clock.Now)
	var out []*sendsv1.ReplyBatch
	for m := range batch.Messages() {
		b := &sendsv1.ReplyBatch{}
		if err := proto.Unmarshal(m.Data(), b); err != nil {
			t.Fatal(err)
		}
		if _, err := x.Reply(ctx, b); err != nil {
			t.Fatal(err)
		}
		if err := m.Ack(); err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// waitingReplies is how many replies wait in the stream.
func (f *conversationsFixture) waitingReplies() uint64 {
	f.e.t.Helper()
	info, err := f.stream.Info(context.Background(), jetstream.WithSubjectFilter(f.e.Bus.ReplyFilter()))
	if err != nil {
		f.e.t.Fatal(err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n
}

func mustContain(t *testing.T, what, body string, wants ...string) {
	t.Helper()
	plain := html.UnescapeString(body)
	for _, w := range wants {
		if !strings.Contains(plain, w) {
			t.Errorf("%s lacks %q", what, w)
		}
	}
}

func TestConsoleConversations(t *testing.T) {
	e := newEnv(t, nil)
	now := e.Clock.Now()
	b := e.browser()
	b.mustSignIn("max@acme.example") // a member: reading and replying are theirs too

	p := b.get("/conversations")
	if p.Status != http.StatusOK {
		t.Fatalf("empty list: %d", p.Status)
	}
	mustContain(t, "the empty list", p.Body, `id="no-conversations"`, "No conversations yet", `id="nav-conversations"`)

	f := e.conversations()
	f.receive("+14155550102", "Bob", f.sales, inboundText("Do you ship to Canada?"), now.Add(-30*time.Hour))
	f.receive("+14155550101", "Jane", f.support, inboundText("Is my order shipped?"), now.Add(-48*time.Minute))
	f.receive("+14155550103", "", f.support, whatsapp.InboundContent{Type: "image",
		Image: &whatsapp.InboundMedia{ID: "m1", MimeType: "image/jpeg", Caption: "the broken lid"}}, now.Add(-5*time.Minute))

	p = b.get("/conversations")
	mustContain(t, "the list", p.Body,
		`data-phone="+14155550101"`, "Jane", "Is my order shipped?", "Acme Support", "Open · 23 h 12 m left",
		`data-phone="+14155550102"`, "Bob", "Closed", "since 2 Jun 2025, 03:30 UTC",
		"[image] the broken lid")
	if i, j := strings.Index(p.Body, "+14155550103"), strings.Index(p.Body, "+14155550101"); i > j {
		t.Error("the list is not the contact who wrote last first")
	}

	// The thread, then a reply by the member.
	p = b.get("/conversations/+14155550101")
	if p.Status != http.StatusOK {
		t.Fatalf("thread: %d\n%s", p.Status, p.Body)
	}
	mustContain(t, "the thread", p.Body, "<h1 id=\"contact-name\">Jane</h1>", "Replies allowed for another 23 h 12 m", "Is my order shipped?",
		`id="reply-form"`, `name="from" value="`+fmt.Sprint(f.support.ID)+`"`)
	p = b.post("/conversations/+14155550101/reply", url.Values{"text": {"Yes, it left this morning."}, "from": {fmt.Sprint(f.support.ID)}})
	if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Header.Get("Location"), "/conversations/+14155550101?reply=") {
		t.Fatalf("reply: %d %s\n%s", p.Status, p.Header.Get("Location"), p.Body)
	}
	// Before a dispatcher takes it, the thread shows it from the stream.
	p = b.get(p.Header.Get("Location"))
	mustContain(t, "the thread after the reply", p.Body, "Reply accepted", `data-direction="outbound" data-state="accepted"`,
		"Yes, it left this morning.", "waiting for a dispatcher")
	replies := f.takeReplies()
	if len(replies) != 1 || replies[0].GetPhone() != "+14155550101" || replies[0].GetMessagingAccountId() != f.support.ID ||
		!strings.Contains(string(replies[0].GetSession()), `"body":"Yes, it left this morning."`) {
		t.Fatalf("replies in the stream: %v", replies)
	}
	p = b.get("/conversations/+14155550101?reply=" + replies[0].GetBatchId())
	mustContain(t, "the thread once recorded", p.Body, fmt.Sprintf(`data-id="%d" data-direction="outbound" data-state="queued"`, replies[0].GetMessageId()),
		"→ Reply", "Yes, it left this morning.")
	if strings.Contains(p.Body, "waiting for a dispatcher") {
		t.Error("a recorded reply is still shown as waiting in the stream")
	}

	// Refusals: each 422 with why, the text kept, nothing published.
	for _, c := range []struct {
		name, phone, text, from, want string
	}{
		{"empty", "+14155550101", "", "", "Write your reply before sending it."},
		{"blank", "+14155550101", "  \n ", "", "Write your reply before sending it."},
		{"too long", "+14155550101", strings.Repeat("a", 4097), "", "A WhatsApp message has at most 4,096 characters; yours has 4,097."},
		{"closed window", "+14155550102", "Yes we do", "", `The 24-hour customer service window with +14155550102 on "Acme Sales" ended at 2025-06-02T03:30:00Z`},
		{"number with no window", "+14155550101", "Hi", fmt.Sprint(f.sales.ID), `+14155550101 has never written to "Acme Sales"`},
		{"another company's number", "+14155550101", "Hi", "999999", "That number is not one of your company's."},
		{"not a number id", "+14155550101", "Hi", "sales", "Choose the number to reply from in the list."},
	} {
		p = b.post("/conversations/"+c.phone+"/reply", url.Values{"text": {c.text}, "from": {c.from}})
		if p.Status != http.StatusUnprocessableEntity {
			t.Errorf("%s: status %d, want 422", c.name, p.Status)
		}
		mustContain(t, c.name, p.Body, `id="reply-error"`, c.want)
		if c.text != "" && strings.TrimSpace(c.text) != "" && strings.Contains(p.Body, `id="reply-form"`) {
			mustContain(t, c.name, p.Body, ">"+c.text+"</textarea>")
		}
	}
	mustContain(t, "the closed window's thread", b.get("/conversations/+14155550102").Body,
		"Window closed at 2 Jun 2025, 03:30 UTC: only templates", `id="reply-closed"`)
	if n := f.waitingReplies(); n != 0 {
		t.Fatalf("%d refused replies reached the stream", n)
	}

	// The window closes while the page is open: refused with the sentence.
	e.Clock.Advance(24 * time.Hour)
	p = b.post("/conversations/+14155550101/reply", url.Values{"text": {"Still there?"}, "from": {fmt.Sprint(f.support.ID)}})
	if p.Status != http.StatusUnprocessableEntity {
		t.Fatalf("reply after the window closed: %d", p.Status)
	}
	mustContain(t, "the reply after the window closed", p.Body, "only a template message can be sent until the contact writes again",
		"Window closed at 3 Jun 2025, 08:42 UTC: only templates")

	// Not found, and another company's conversation.
	for _, path := range []string{"/conversations/+14155550199", "/conversations/not-a-number"} {
		if p = b.get(path); p.Status != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", path, p.Status)
		}
	}
	if p = b.get("/conversations?cursor=nonsense"); p.Status != http.StatusBadRequest {
		t.Errorf("a cursor no list gave: %d", p.Status)
	}
	var globex int64
	if err := e.Pool.QueryRow(context.Background(), `INSERT INTO companies (slug, name, subscription_active, provisioned)
		VALUES ('globex', 'Globex', true, true) RETURNING id`).Scan(&globex); err != nil {
		t.Fatal(err)
	}
	theirs, err := f.cat.CreateMessagingAccount(context.Background(), catalog.NewMessagingAccount{CompanyID: globex, Name: "Globex",
		PhoneNumberID: "15550002999", AccessToken: "t3", Connected: true})
	if err != nil {
		t.Fatal(err)
	}
	f.receive("+14155550177", "Eve", theirs, inboundText("Globex's customer"), e.Clock.Now())
	if p = b.get("/conversations/+14155550177"); p.Status != http.StatusNotFound {
		t.Errorf("another company's conversation: %d, want 404", p.Status)
	}
	if p = b.post("/conversations/+14155550177/reply", url.Values{"text": {"Hi"}}); p.Status == http.StatusSeeOther {
		t.Error("a reply to another company's contact was accepted")
	}
	if n := f.waitingReplies(); n != 0 {
		t.Fatalf("%d replies reached the stream", n)
	}
}

// TestConsoleReplyRoles: admins and members may reply (answering customers
// is the members' daily work); nobody signed out, and no form from another
// site.
func TestConsoleReplyRoles(t *testing.T) {
	e := newEnv(t, nil)
	f := e.conversations()
	f.receive("+14155550101", "Jane", f.support, inboundText("Hello?"), e.Clock.Now().Add(-time.Minute))
	form := url.Values{"text": {"Hello Jane"}}

	out := e.browser()
	p := out.post("/conversations/+14155550101/reply", form)
	if p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/login" {
		t.Fatalf("signed out: %d %s", p.Status, p.Header.Get("Location"))
	}
	admin := e.browser()
	admin.mustSignIn("ada@acme.example")
	p = admin.post("/conversations/+14155550101/reply", form, "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site")
	if p.Status != http.StatusForbidden {
		t.Fatalf("cross-site reply: %d", p.Status)
	}
	if n := f.waitingReplies(); n != 0 {
		t.Fatalf("%d replies in the stream after refusals", n)
	}
	for _, who := range []string{"ada@acme.example", "max@acme.example"} {
		b := e.browser()
		b.mustSignIn(who)
		if p := b.post("/conversations/+14155550101/reply", form); p.Status != http.StatusSeeOther {
			t.Fatalf("%s's reply: %d\n%s", who, p.Status, p.Body)
		}
	}
	if got := f.takeReplies(); len(got) != 2 {
		t.Fatalf("%d replies in the stream, want the admin's and the member's", len(got))
	}
	if !strings.Contains(e.Logs.String(), `"msg":"reply sent from the console"`) || strings.Contains(e.Logs.String(), "Hello Jane") {
		t.Error("the reply is not logged, or its text is")
	}

	// No stream to take it (the admin service never creates it): 503, the
	// text kept.
	if err := f.stream.Purge(context.Background()); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(e.Bus.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(context.Background(), e.Bus.Stream); err != nil {
		t.Fatal(err)
	}
	p = admin.post("/conversations/+14155550101/reply", form)
	if p.Status != http.StatusServiceUnavailable {
		t.Fatalf("a reply without the stream: %d", p.Status)
	}
	mustContain(t, "a reply without the stream", p.Body, "Your reply was not sent", ">Hello Jane</textarea>")
}

// campaignMessage writes a campaign message to phone as the campaign
// dispatcher leaves it: sent with the template "order_update" (en_US) by
// the campaign "Spring sale", in state, with a provider error when failed.
func (f *conversationsFixture) campaignMessage(phone, state string, code int, title string, at time.Time) {
	f.e.t.Helper()
	ctx := context.Background()
	var campaignID, templateID int64
	err := f.e.Pool.QueryRow(ctx, `SELECT c.id, c.template_id FROM campaigns c WHERE c.company_id = $1 AND c.name = 'Spring sale'`,
		f.e.CompanyID).Scan(&campaignID, &templateID)
	if err != nil {
		tpl, err := f.cat.CreateTemplate(ctx, catalog.NewTemplate{CompanyID: f.e.CompanyID,
			Template: whatsapp.Template{Name: "order_update", Language: "en_US", HeaderKind: whatsapp.HeaderNone}})
		if err != nil {
			f.e.t.Fatal(err)
		}
		c, err := f.cat.CreateCampaign(ctx, f.e.CompanyID, "Spring sale", tpl.ID, f.support.ID)
		if err != nil {
			f.e.t.Fatal(err)
		}
		campaignID, templateID = c.ID, tpl.ID
	}
	batchID := fmt.Sprintf("0197c2d4-8f7a-7b3e-9c1d-%012d", at.UnixMilli()%1e12)
	if _, err := f.e.Pool.Exec(ctx, `INSERT INTO batches (id, company_id, kind, source, contact_count, status, accepted_at, completed_at, campaign_id)
		VALUES ($1, $2, 'campaign', 'api:campaigns_send', 1, 'completed', $3, $3, $4)`, batchID, f.e.CompanyID, at, campaignID); err != nil {
		f.e.t.Fatal(err)
	}
	var codeP *int
	var titleP *string
	if code != 0 {
		codeP, titleP = &code, &title
	}
	if _, err := f.e.Pool.Exec(ctx, `INSERT INTO messages (batch_id, seq, company_id, phone, messaging_account_id, template_id, state,
			error_code, error_title, attempts, created_at, updated_at, sent_at)
		VALUES ($1, 0, $2, $3, $4, $5, $6::text::message_state, $7, $8, 1, $9, $9, $9)`,
		batchID, f.e.CompanyID, phone, f.support.ID, templateID, state, codeP, titleP, at); err != nil {
		f.e.t.Fatal(err)
	}
}
