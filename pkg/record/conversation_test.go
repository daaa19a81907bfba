package record_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/events"
	"github.com/parleyhq/parley/pkg/record"
)

func (f *fixture) account() catalog.MessagingAccount {
	f.t.Helper()
	a, err := f.cat.MessagingAccount(f.ctx, f.camp.MessagingAccountID)
	if err != nil {
		f.t.Fatal(err)
	}
	return a
}

// inbound is a text a contact sent to the fixture's number at.
func (f *fixture) inbound(wamid, from, text string, at time.Time) whatsapp.InboundMessage {
	return whatsapp.InboundMessage{PhoneNumberID: f.account().PhoneNumberID, ID: wamid, From: from, Timestamp: at,
		Type: "text", Text: text, ProfileName: "Ana",
		Content: whatsapp.InboundContent{Type: "text", Text: &whatsapp.InboundText{Body: text}}}
}

func (f *fixture) receive(msgs ...whatsapp.InboundMessage) record.InboundResult {
	f.t.Helper()
	res, err := record.Receive(f.ctx, f.pool, msgs, f.now)
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

// outbox is the data of the company's events of type t, oldest first.
func (f *fixture) outbox(t events.Type) []json.RawMessage {
	f.t.Helper()
	rows, err := f.pool.Query(f.ctx, `SELECT data FROM event_outbox WHERE company_id = $1 AND type = $2 ORDER BY seq`, f.comp.ID, string(t))
	if err != nil {
		f.t.Fatal(err)
	}
	var out []json.RawMessage
	for rows.Next() {
		var d []byte
		if err := rows.Scan(&d); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// TestReceiveRecordsOncePerWamid: a message is recorded with its content,
// contact, window and event once, however often Meta repeats it; a message
// to a number no company has is ignored.
func TestReceiveRecordsOncePerWamid(t *testing.T) {
	f := newFixture(t)
	sent := f.now.Add(-time.Hour)
	m := f.inbound("wamid.in1", "+14155550001", "Is my order shipped?", sent)
	if res := f.receive(m); res.Recorded != 1 || res.Created != 1 {
		t.Fatalf("first delivery: %+v", res)
	}
	if res := f.receive(m, m); res.Repeated != 2 || res.Recorded != 0 {
		t.Fatalf("repeated deliveries: %+v", res)
	}
	stranger := m
	stranger.PhoneNumberID, stranger.ID = "999999999", "wamid.x"
	if res := f.receive(stranger); res.Ignored != 1 {
		t.Fatalf("a number no company has: %+v", res)
	}
	evs := f.outbox(events.MessageReceived)
	if len(evs) != 1 {
		t.Fatalf("%d message.received events, want 1", len(evs))
	}
	var ev events.Received
	if err := json.Unmarshal(evs[0], &ev); err != nil {
		t.Fatal(err)
	}
	acct := f.account()
	if ev.Wamid != "wamid.in1" || ev.Phone != "+14155550001" || ev.ProfileName != "Ana" || ev.MessagingAccountName != acct.Name ||
		ev.Type != "text" || !ev.SentAt.Equal(sent) || !ev.WindowExpiresAt.Equal(sent.Add(24*time.Hour)) || ev.MessageID == 0 {
		t.Fatalf("event %+v", ev)
	}
	var content whatsapp.InboundContent
	if err := json.Unmarshal(ev.Content, &content); err != nil || content.Text == nil || content.Text.Body != "Is my order shipped?" {
		t.Fatalf("content %s: %v", ev.Content, err)
	}
	c, err := record.Contact(f.ctx, f.pool, f.comp.ID, "+14155550001", f.now)
	if err != nil {
		t.Fatal(err)
	}
	if c.ProfileName != "Ana" || len(c.Windows) != 1 || !c.Windows[0].Open || !c.Windows[0].ExpiresAt.Equal(sent.Add(24*time.Hour)) {
		t.Fatalf("contact %+v", c)
	}
	// Another company never sees it.
	if _, err := record.Contact(f.ctx, f.pool, f.other.ID, "+14155550001", f.now); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("another company's contact: %v", err)
	}
}

// TestWindowFollowsTheLatestMessage: each message opens or extends the
// window to 24 hours after it was sent; an older one arriving late does
// not shorten it; 24 hours after the last, it is closed.
func TestWindowFollowsTheLatestMessage(t *testing.T) {
	f := newFixture(t)
	p := "+14155550002"
	f.receive(f.inbound("w1", p, "hi", f.now.Add(-30*time.Hour)))
	w := f.windows(p)
	if w.Open {
		t.Fatalf("a window of a message 30 h old: %+v", w)
	}
	f.receive(f.inbound("w2", p, "hello?", f.now.Add(-2*time.Hour)))
	f.receive(f.inbound("w3", p, "late", f.now.Add(-5*time.Hour))) // older, arrives last
	w = f.windows(p)
	if !w.Open || !w.LastInboundAt.Equal(f.now.Add(-2*time.Hour)) || !w.ExpiresAt.Equal(f.now.Add(22*time.Hour)) {
		t.Fatalf("window %+v", w)
	}
	// A clock ahead of ours counts from now.
	f.receive(f.inbound("w4", p, "from the future", f.now.Add(time.Hour)))
	if w = f.windows(p); !w.LastInboundAt.Equal(f.now) {
		t.Fatalf("window after a message from the future: %+v", w)
	}
	page, err := record.Conversations(f.ctx, f.pool, f.comp.ID, record.ConversationFilter{}, f.now)
	if err != nil || len(page.Conversations) != 1 {
		t.Fatalf("%+v %v", page, err)
	}
	if c := page.Conversations[0]; c.Phone != p || c.LastMessage.Summary != "from the future" || c.ProfileName != "Ana" {
		t.Fatalf("conversation %+v", c)
	}
}

func (f *fixture) windows(phone string) record.Window {
	f.t.Helper()
	ws, err := record.Windows(f.ctx, f.pool, f.comp.ID, phone, f.now)
	if err != nil || len(ws) != 1 {
		f.t.Fatalf("windows %+v, %v", ws, err)
	}
	return ws[0]
}

// TestReplyTargetsAndThread: a reply goes from the number the contact
// wrote to, with its window; it is recorded with the id it was given,
// and the thread lists both directions newest first, by page.
func TestReplyTargetsAndThread(t *testing.T) {
	f := newFixture(t)
	p := "+14155550003"
	if _, err := record.TargetReply(f.ctx, f.pool, f.comp.ID, p, 0, f.now); !errors.Is(err, record.ErrNoConversation) {
		t.Fatalf("no conversation: %v", err)
	}
	if _, err := record.TargetReply(f.ctx, f.pool, f.other.ID, p, f.account().ID, f.now); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("another company's account: %v", err)
	}
	tgt, err := record.TargetReply(f.ctx, f.pool, f.comp.ID, p, f.account().ID, f.now)
	if err != nil || tgt.Window != nil || tgt.AccountID != f.account().ID || !tgt.Connected {
		t.Fatalf("an account named, no window: %+v %v", tgt, err)
	}
	f.receive(f.inbound("w-q", p, "question", f.now.Add(-time.Minute)))
	tgt, err = record.TargetReply(f.ctx, f.pool, f.comp.ID, p, 0, f.now)
	if err != nil || tgt.Window == nil || !tgt.Window.Open || tgt.MessageID <= 0 {
		t.Fatalf("target %+v %v", tgt, err)
	}
	if w, err := record.QuotedWamid(f.ctx, f.pool, f.comp.ID, p, "w-q"); err != nil || w != "w-q" {
		t.Fatalf("quoted by wamid: %q %v", w, err)
	}
	in, err := record.FindMessage(f.ctx, f.pool, f.comp.ID, "w-q")
	if err != nil || in.In == nil {
		t.Fatalf("inbound by wamid: %+v %v", in, err)
	}
	if w, err := record.QuotedWamid(f.ctx, f.pool, f.comp.ID, p, strconv.FormatInt(in.ID(), 10)); err != nil || w != "w-q" {
		t.Fatalf("quoted by id: %q %v", w, err)
	}
	if _, err := record.QuotedWamid(f.ctx, f.pool, f.comp.ID, "+14155550004", "w-q"); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("another conversation's message: %v", err)
	}
	session, _ := json.Marshal(whatsapp.Session{Type: "text", Text: &whatsapp.SessionText{Body: "Yes, today"}})
	id, _ := uuid.NewV7()
	if _, err := f.exp.Reply(f.ctx, &sendsv1.ReplyBatch{BatchId: id.String(), CompanyId: f.comp.ID, MessageId: tgt.MessageID,
		Phone: p, MessagingAccountId: tgt.AccountID, Session: session, AcceptedAt: timestamppb.New(f.now)}); err != nil {
		t.Fatal(err)
	}
	out, err := record.FindMessage(f.ctx, f.pool, f.comp.ID, strconv.FormatInt(tgt.MessageID, 10))
	if err != nil || out.Out == nil || out.Out.State != record.StateQueued || out.Out.Kind != "reply" || len(out.Out.Content) == 0 {
		t.Fatalf("the reply: %+v %v", out, err)
	}
	f.receive(f.inbound("w-thanks", p, "thanks", f.now))
	var dirs []string
	filter := record.PhoneFilter{Limit: 1}
	for {
		page, err := record.PhoneMessages(f.ctx, f.pool, f.comp.ID, p, filter)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Messages {
			b, _ := json.Marshal(e)
			var d struct{ Direction string }
			_ = json.Unmarshal(b, &d)
			dirs = append(dirs, d.Direction)
		}
		if page.NextCursor == nil {
			break
		}
		filter.Cursor = *page.NextCursor
	}
	if want := []string{"inbound", "outbound", "inbound"}; !slices.Equal(dirs, want) {
		t.Fatalf("thread %v, want %v (newest first)", dirs, want)
	}
}

// TestEraseContact: the contact and what names the number go; the
// messages stay as anonymous counts; a message still waiting is
// cancelled; an erasure of nothing is zeros; the batch is completed.
func TestEraseContact(t *testing.T) {
	f := newFixture(t)
	b := f.campaignBatch(2, nil) // +14155550000, +14155550001: queued
	f.expand(b)
	p := "+14155550001"
	f.receive(f.inbound("w-e", p, "STOPP", f.now))
	if len(f.outbox(events.MessageReceived)) != 1 {
		t.Fatal("no message.received event to erase")
	}
	e, err := record.EraseContact(f.ctx, f.pool, f.comp.ID, p, f.now)
	if err != nil {
		t.Fatal(err)
	}
	if !e.Contact || e.Messages != 1 || e.Cancelled != 1 || e.Inbound != 1 || e.Events < 1 {
		t.Fatalf("erasure %+v", e)
	}
	var named int
	if err := f.pool.QueryRow(f.ctx, `SELECT (SELECT count(*) FROM messages WHERE phone = $1) + (SELECT count(*) FROM inbound_messages WHERE phone = $1)
		+ (SELECT count(*) FROM contacts WHERE phone = $1) + (SELECT count(*) FROM conversation_windows WHERE phone = $1)
		+ (SELECT count(*) FROM event_outbox WHERE data::text LIKE '%' || $1 || '%')
		+ (SELECT count(*) FROM inbound_messages WHERE content IS NOT NULL AND erased_at IS NOT NULL)`, p).Scan(&named); err != nil {
		t.Fatal(err)
	}
	if named != 0 {
		t.Fatalf("%d rows still name %s", named, p)
	}
	if st := f.states(b.BatchId); st["cancelled"] != 1 || st["queued"] != 1 {
		t.Fatalf("batch states %v: the erased number's message cancelled, the other kept", st)
	}
	again, err := record.EraseContact(f.ctx, f.pool, f.comp.ID, p, f.now)
	if err != nil || again.Contact || again.Messages != 0 || again.Inbound != 0 {
		t.Fatalf("a second erasure: %+v %v", again, err)
	}
}

// TestEraseWhileSending: a message in flight when its contact is erased
// keeps no wamid when its send is recorded, and one sent back by a retry
// is cancelled, never queued with no number.
func TestEraseWhileSending(t *testing.T) {
	f := newFixture(t)
	moves := f.watchMoves()
	b := f.campaignBatch(2, nil)
	f.expand(b)
	claimed, err := record.Claim(f.ctx, f.pool, record.LaneCampaign, f.camp.MessagingAccountID, 2, f.now, false)
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claimed %d: %v", len(claimed), err)
	}
	for _, c := range claimed {
		if _, err := record.EraseContact(f.ctx, f.pool, f.comp.ID, c.Phone, f.now); err != nil {
			t.Fatal(err)
		}
	}
	outs := []record.Outcome{
		{Kind: record.OutcomeSent, ID: claimed[0].ID, BatchID: b.BatchId, ClaimedAt: claimed[0].ClaimedAt, Wamid: "wamid.erased", At: f.now},
		{Kind: record.OutcomeRetry, ID: claimed[1].ID, BatchID: b.BatchId, ClaimedAt: claimed[1].ClaimedAt, NotBefore: f.now, At: f.now},
	}
	if _, err := record.RecordOutcomes(f.ctx, f.pool, outs, f.now); err != nil {
		t.Fatal(err)
	}
	var wamids, cancelled, named int
	if err := f.pool.QueryRow(f.ctx, `SELECT count(provider_message_id), count(*) FILTER (WHERE state = 'cancelled'),
		count(*) FILTER (WHERE phone <> '') FROM messages WHERE batch_id = $1`, b.BatchId).Scan(&wamids, &cancelled, &named); err != nil {
		t.Fatal(err)
	}
	if wamids != 0 || cancelled != 1 || named != 0 {
		t.Fatalf("wamids %d, cancelled %d, with a number %d: want 0, 1, 0", wamids, cancelled, named)
	}
	if st := f.states(b.BatchId); st["sent"] != 1 {
		t.Fatalf("states %v", st)
	}
	for move, n := range moves() {
		var from, to record.State
		fmt.Sscanf(move, "%s -> %s", &from, &to)
		if !record.CanMove(from, to) {
			t.Errorf("%d message(s) moved %s, which record.Moves does not allow", n, move)
		}
	}
}
