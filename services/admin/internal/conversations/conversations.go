// Package conversations is the console's and parleyctl's side of a
// company's conversations with its contacts: the list (pkg/record's, the
// one GET /api/conversations answers), one contact's thread in both
// directions with the names a person reads (the number, the campaign or
// automation, the template), a reply still waiting in the SENDS stream, and
// the reply itself through pkg/replies, as POST /api/messages sends it.
package conversations

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/pkg/replies"
)

// ErrNotFound is a number the company has no conversation with: no
// contact, no message either way (or an erased one).
var ErrNotFound = record.ErrNotFound

// Store reads conversations from PostgreSQL and, given the SENDS stream,
// sends replies and finds those not recorded yet.
type Store struct {
	db  *pgxpool.Pool
	now func() time.Time
	// js and bus are the SENDS stream; nil js: reading only.
	js      jetstream.JetStream
	bus     bus.Config
	replies *replies.Service
}

// New returns the store on pool. js (with its configuration) is the SENDS
// stream replies are published to; nil for a store that only reads.
func New(pool *pgxpool.Pool, js jetstream.JetStream, cfg bus.Config, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	s := &Store{db: pool, now: now, js: js, bus: cfg}
	if js != nil {
		s.replies = replies.New(replies.NewStore(pool, now), replies.StreamPublisher{JS: js, Bus: cfg}, now)
	}
	return s
}

// List is a page of the company's conversations, the one whose contact
// wrote last first (record.Conversations at the store's time).
func (s *Store) List(ctx context.Context, companyID int64, limit int, cursor string) (record.ConversationPage, error) {
	return record.Conversations(ctx, s.db, companyID, record.ConversationFilter{Limit: limit, Cursor: cursor}, s.now())
}

// Thread is a page of one number's conversation with the company.
type Thread struct {
	// Contact is the company's contact of the number (GET
	// /api/contacts/{phone}); nil when the number is not one, or no longer.
	Contact *record.ContactView `json:"contact"`
	// PhonePage is the page of messages, newest first (GET
	// /api/contacts/{phone}/messages).
	record.PhonePage
	// names are what the outbound messages of the page are, by id.
	names map[int64]names
}

// names are the names of what an outbound message was sent from and with.
type names struct {
	Number, Template, Language, Campaign, Automation string
}

// Thread reads a page of the company's conversation with phone (E.164
// with its +): the contact and the messages both ways, newest first, and
// the names of what sent each. ErrNotFound when the company has neither a
// contact of that number nor a message with it; an *record.InvalidError
// for a limit or cursor that cannot be used.
func (s *Store) Thread(ctx context.Context, companyID int64, phone string, limit int, cursor string) (Thread, error) {
	var t Thread
	c, err := record.Contact(ctx, s.db, companyID, phone, s.now())
	switch {
	case err == nil:
		t.Contact = &c
	case !errors.Is(err, record.ErrNotFound):
		return Thread{}, err
	}
	if t.PhonePage, err = record.PhoneMessages(ctx, s.db, companyID, phone, record.PhoneFilter{Limit: limit, Cursor: cursor}); err != nil {
		return Thread{}, err
	}
	if t.Messages == nil {
		t.Messages = []record.Entry{}
	}
	var ids []int64
	for _, m := range t.Messages {
		if m.Out != nil {
			ids = append(ids, m.Out.ID)
		}
	}
	if t.names, err = s.names(ctx, companyID, ids); err != nil {
		return Thread{}, err
	}
	return t, nil
}

// names reads the number, template, campaign and automation of the
// company's messages ids.
func (s *Store) names(ctx context.Context, companyID int64, ids []int64) (map[int64]names, error) {
	out := make(map[int64]names, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.db.Query(ctx, `
		SELECT m.id, COALESCE(a.name, ''), COALESCE(t.name, ''), COALESCE(t.language, ''), COALESCE(c.name, ''), COALESCE(au.name, '')
		FROM messages m
		JOIN batches b ON b.id = m.batch_id
		LEFT JOIN messaging_accounts a ON a.id = m.messaging_account_id
		LEFT JOIN templates t ON t.id = m.template_id
		LEFT JOIN campaigns c ON c.id = b.campaign_id
		LEFT JOIN automations au ON au.id = b.automation_id
		WHERE m.company_id = $1 AND m.id = ANY($2)`, companyID, ids)
	if err != nil {
		return nil, fmt.Errorf("name messages: %w", err)
	}
	var id int64
	var n names
	_, err = pgx.ForEachRow(rows, []any{&id, &n.Number, &n.Template, &n.Language, &n.Campaign, &n.Automation}, func() error {
		out[id] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("name messages: %w", err)
	}
	return out, nil
}

// Line is one message of a thread as a person reads it.
type Line struct {
	ID int64
	// Inbound is a message the contact sent; else Parley sent it.
	Inbound bool
	// At is when the contact sent it, or when Parley created it.
	At time.Time
	// Number is the name of the company's number it went to or from.
	Number string
	// Text is what it says: the text, "[image] caption", or the template
	// it was sent with.
	Text string
	// Via is what sent an outbound message: `campaign "Spring sale"`,
	// `automation "Order update"`, "reply", "batch" or "connector".
	Via string
	// State is an outbound message's state ("accepted" while it waits in
	// the stream for a dispatcher).
	State      string
	ErrorCode  *int
	ErrorTitle string
	// Pending is a reply accepted but not recorded by a dispatcher yet.
	Pending bool
}

// Failed reports whether WhatsApp or Parley refused the message.
func (l Line) Failed() bool { return l.State == string(record.StateFailed) }

// Lines are the page's messages, oldest first, as a chat shows them.
func (t Thread) Lines() []Line {
	out := make([]Line, 0, len(t.Messages))
	for i := len(t.Messages) - 1; i >= 0; i-- {
		m := t.Messages[i]
		if m.In != nil {
			out = append(out, Line{ID: m.In.ID, Inbound: true, At: m.In.SentAt, Number: m.In.MessagingAccountName, Text: m.In.Summary})
			continue
		}
		f := m.Out
		n := t.names[f.ID]
		l := Line{ID: f.ID, At: f.Times.Created, Number: n.Number, Via: via(f.Kind, n), State: string(f.State), ErrorCode: f.ErrorCode}
		if f.ErrorTitle != nil {
			l.ErrorTitle = *f.ErrorTitle
		}
		if len(f.Content) > 0 {
			l.Text = SessionSummary(f.Content)
		} else {
			l.Text = templateText(n.Template, n.Language)
		}
		out = append(out, l)
	}
	return out
}

// Has reports whether the page holds the message id.
func (t Thread) Has(id int64) bool {
	for _, m := range t.Messages {
		if m.ID() == id {
			return true
		}
	}
	return false
}

func via(kind bus.BatchKind, n names) string {
	switch {
	case n.Campaign != "":
		return fmt.Sprintf("campaign %q", n.Campaign)
	case n.Automation != "":
		return fmt.Sprintf("automation %q", n.Automation)
	}
	return string(kind)
}

func templateText(name, language string) string {
	switch {
	case name == "":
		return "template"
	case language == "":
		return fmt.Sprintf("template %q", name)
	}
	return fmt.Sprintf("template %q (%s)", name, language)
}

// SessionSummary is one line of a session message (the Cloud API's wire
// format, as a reply's content is kept) for people, as InboundContent's
// Summary is for what contacts send: the text, "[image] caption", ...
func SessionSummary(raw json.RawMessage) string {
	var s whatsapp.Session
	if json.Unmarshal(raw, &s) != nil {
		return "[message]"
	}
	tagged := func(tag, text string) string {
		if text = strings.TrimSpace(text); text == "" {
			return "[" + tag + "]"
		}
		return "[" + tag + "] " + text
	}
	media := func(tag string, m *whatsapp.SessionMedia) string {
		if m == nil {
			return "[" + tag + "]"
		}
		text := m.Caption
		if text == "" {
			text = m.Filename
		}
		return tagged(tag, text)
	}
	switch s.Type {
	case whatsapp.MessageTypeText:
		if s.Text != nil {
			return s.Text.Body
		}
	case whatsapp.MessageTypeImage:
		return media("image", s.Image)
	case whatsapp.MessageTypeVideo:
		return media("video", s.Video)
	case whatsapp.MessageTypeDocument:
		return media("document", s.Document)
	case whatsapp.MessageTypeAudio:
		return "[audio]"
	case whatsapp.MessageTypeSticker:
		return "[sticker]"
	case whatsapp.MessageTypeInteractive:
		if s.Interactive != nil {
			tag := "buttons"
			if s.Interactive.Type == "list" {
				tag = "list"
			}
			return tagged(tag, s.Interactive.Body.Text)
		}
	case whatsapp.MessageTypeReaction:
		if s.Reaction != nil && s.Reaction.Emoji == "" {
			return "[reaction removed]"
		}
		if s.Reaction != nil {
			return tagged("reaction", s.Reaction.Emoji)
		}
	}
	return "[" + s.Type + "]"
}

// Pending finds the company's reply batchID while it waits in the SENDS
// stream for a dispatcher to record it, as a line of phone's thread; nil
// when it is not there (recorded already, or never accepted), or is not a
// reply to phone. A store without the stream finds nothing.
func (s *Store) Pending(ctx context.Context, companyID int64, phone, batchID string) (*Line, error) {
	if s.js == nil || batchID == "" {
		return nil, nil
	}
	st, err := s.js.Stream(ctx, s.bus.Stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", s.bus.Stream, err)
	}
	m, _, err := s.bus.FindBatch(ctx, st, companyID, batchID)
	if errors.Is(err, bus.ErrBatchNotInStream) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find reply %s in the stream: %w", batchID, err)
	}
	b, ok := m.(*sendsv1.ReplyBatch)
	if !ok || b.GetPhone() != phone {
		return nil, nil
	}
	l := &Line{ID: b.GetMessageId(), At: b.GetAcceptedAt().AsTime(), Via: string(bus.BatchReply), State: "accepted", Pending: true}
	var tpl, lang *string
	err = s.db.QueryRow(ctx, `
		SELECT a.name, t.name, t.language
		FROM messaging_accounts a LEFT JOIN templates t ON t.id = $3 AND t.company_id = a.company_id
		WHERE a.id = $1 AND a.company_id = $2`, b.GetMessagingAccountId(), companyID, b.GetTemplateId()).Scan(&l.Number, &tpl, &lang)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("name reply %s: %w", batchID, err)
	}
	if len(b.GetSession()) > 0 {
		l.Text = SessionSummary(b.GetSession())
	} else {
		l.Text = templateText(deref(tpl), deref(lang))
	}
	return l, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// ErrReadOnly is a reply through a store opened without the stream.
var ErrReadOnly = errors.New("conversations: no stream to send replies to")

// TextError is a reply text WhatsApp would refuse, with why.
type TextError struct {
	Problems []whatsapp.FieldError
	// Length is the text's length in characters.
	Length int
}

func (e *TextError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Msg
	}
	return "reply text: " + strings.Join(msgs, "; ")
}

// TooLong reports whether the text is over WhatsApp's limit.
func (e *TextError) TooLong() bool {
	for _, p := range e.Problems {
		if p.Type == "string_too_long" {
			return true
		}
	}
	return false
}

// TextSession is text as a session message, checked as the Cloud API
// checks it (whatsapp.Session.Validate: 1 to 4,096 characters, not blank);
// a *TextError when it would be refused.
func TextSession(text string) (*whatsapp.Session, error) {
	s := &whatsapp.Session{Type: whatsapp.MessageTypeText, Text: &whatsapp.SessionText{Body: text}}
	if probs := s.Validate(); len(probs) > 0 {
		return nil, &TextError{Problems: probs, Length: utf8.RuneCountInString(text)}
	}
	return s, nil
}

// Reply sends one reply to phone from accountID (0: the number the
// contact wrote to last), as POST /api/messages does, recorded as asked
// by source (replies.SourceConsole, replies.SourceParleyctl): a session message
// inside the contact's window (a *replies.WindowClosedError outside it), or
// a template at any time. The errors are pkg/replies' and TextSession's.
func (s *Store) Reply(ctx context.Context, companyID int64, source bus.Source, req replies.Request) (replies.Accepted, error) {
	if s.replies == nil {
		return replies.Accepted{}, ErrReadOnly
	}
	if req.Session != nil && req.Session.Type == whatsapp.MessageTypeText && req.Session.Text != nil {
		if _, err := TextSession(req.Session.Text.Body); err != nil {
			return replies.Accepted{}, err
		}
	}
	batchID, err := replies.NewBatchID()
	if err != nil {
		return replies.Accepted{}, err
	}
	return s.replies.Send(ctx, replies.Meta{CompanyID: companyID, BatchID: batchID, Source: source}, req)
}

// DisplayName is how a person is named: the company's own first and last
// name for the contact, else the WhatsApp profile name, else "".
func DisplayName(first, last, profile string) string {
	if n := strings.TrimSpace(first + " " + last); n != "" {
		return n
	}
	return strings.TrimSpace(profile)
}
