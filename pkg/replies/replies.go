// Package replies accepts a reply to a contact (POST /api/messages, the
// console's reply box, parleyctl conversations reply): it decides the number
// the reply goes from, holds a session message to the contact's 24-hour
// customer service window, turns the message it quotes or reacts to into a
// wamid, takes the message's id, and hands the reply to the automation
// dispatcher through the SENDS stream. It knows nothing of HTTP.
package replies

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/record"
)

// Conversations is what a reply reads before it is accepted (Store).
type Conversations interface {
	// TargetReply is record.TargetReply.
	TargetReply(ctx context.Context, companyID int64, phone string, accountID int64) (record.ReplyTarget, error)
	// QuotedWamid is record.QuotedWamid.
	QuotedWamid(ctx context.Context, companyID int64, phone, key string) (string, error)
	// PriorMessageID is the message id an earlier attempt of the reply
	// batch gave it (record.ReplyMessageID); ok false when none did.
	PriorMessageID(ctx context.Context, companyID int64, batchID string) (id int64, ok bool, err error)
	// TemplateByName is the company's template of that name (and language,
	// when not ""); catalog.ErrNotFound when there is none, ErrAmbiguous
	// when the name has several languages and none was given.
	TemplateByName(ctx context.Context, companyID int64, name, language string) (catalog.Template, error)
}

// ErrAmbiguous is a template name that several languages share, named
// without one.
var ErrAmbiguous = errors.New("template name has several languages")

// Request is a validated reply: one message to one contact, a session
// message or a template.
type Request struct {
	Phone string
	// AccountID is the number it goes from; 0: the one the contact wrote
	// to last.
	AccountID int64
	// Session is the session message (nil for a template); its context and
	// reaction name a message by Parley's id or wamid, which the use case
	// turns into the wamid the Cloud API wants.
	Session *whatsapp.Session
	// Template names a template (by name, optionally with a language) and
	// its variables.
	Template *Template
}

// Template is a reply's template message.
type Template struct {
	Name      string
	Language  string
	Variables map[string]string
}

// Meta is what a request carries besides its body.
type Meta struct {
	CompanyID      int64
	IdempotencyKey string
	// BatchID, when set, is reused (a retried publish that ended in doubt).
	BatchID string
	// Source is what asked for the reply, recorded with its batch:
	// bus.SourceMessagesSend (the API, also when empty), SourceConsole,
	// SourceParleyctl.
	Source bus.Source
}

// The sources of replies that do not come through the API.
const (
	SourceConsole   bus.Source = "console:conversations"
	SourceParleyctl bus.Source = "parleyctl:conversations"
)

// Accepted is a reply in the stream: its batch and its message.
type Accepted struct {
	BatchID   string
	MessageID int64
}

// Errors of Send. A publisher's own errors (the stream did not take the
// reply) are returned as they are, with the batch id when the reply may be
// in the stream.
var (
	ErrAccountNotFound  = errors.New("messaging account not found")
	ErrTemplateNotFound = errors.New("template not found")
	// ErrPriorUnknown: a retried reply whose earlier attempt cannot be
	// looked up (the stream cannot be read); nothing was published.
	ErrPriorUnknown = errors.New("the earlier attempt of this reply cannot be looked up")
)

// Problem is one reason a reply cannot be sent as asked, in the shape of a
// 422 detail item.
type Problem struct {
	Type  string
	Loc   []any
	Msg   string
	Input any
}

// InvalidError is a reply that names what cannot be used: a disconnected
// number, a message not of the conversation, an ambiguous template (422).
type InvalidError struct{ Problems []Problem }

func (e *InvalidError) Error() string {
	return fmt.Sprintf("reply cannot be sent: %d problem(s), first: %s", len(e.Problems), e.Problems[0].Msg)
}

// Publisher puts a company's batch of a subject kind on the stream and
// returns its id once it is acknowledged; with batchID empty it gives the
// batch its id (StreamPublisher, or the gateway's group commit).
type Publisher interface {
	Publish(ctx context.Context, kind string, companyID int64, batchID string, m bus.BatchMessage) (string, error)
}

// Service accepts replies.
type Service struct {
	store Conversations
	pub   Publisher
	now   func() time.Time
}

// New returns the service.
func New(store Conversations, pub Publisher, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{store: store, pub: pub, now: now}
}

// WindowClosedError is a session message to a contact whose 24-hour window
// with the number is closed (or was never opened): 422, only a template may
// be sent.
type WindowClosedError struct {
	Phone string
	// AccountName is the number's name; "" when the contact never wrote to
	// any of the company's numbers.
	AccountName string
	// Window is nil when the contact never wrote to the number.
	Window *record.Window
}

func (e *WindowClosedError) Error() string {
	if e.Window == nil {
		to := "any of your numbers"
		if e.AccountName != "" {
			to = strconv.Quote(e.AccountName)
		}
		return fmt.Sprintf("%s has never written to %s: a session message can only answer a contact inside the 24-hour customer service window; send a template message", e.Phone, to)
	}
	return fmt.Sprintf("The 24-hour customer service window with %s on %q ended at %s (24 hours after the contact's last message, at %s): only a template message can be sent until the contact writes again",
		e.Phone, e.AccountName, e.Window.ExpiresAt.UTC().Format(time.RFC3339), e.Window.LastInboundAt.UTC().Format(time.RFC3339))
}

// Send accepts a reply. The number it goes from must be the company's
// and connected; a session message needs the contact's window with that
// number open (a *WindowClosedError otherwise), a template may go at any
// time; a quoted or reacted-to message must be one of this conversation's
// (an *InvalidError otherwise). The reply's message id is taken now, so that
// the 202 names it.
func (s *Service) Send(ctx context.Context, m Meta, req Request) (Accepted, error) {
	t, err := s.store.TargetReply(ctx, m.CompanyID, req.Phone, req.AccountID)
	switch {
	case errors.Is(err, record.ErrNotFound):
		return Accepted{}, ErrAccountNotFound
	case errors.Is(err, record.ErrNoConversation) && req.Session != nil:
		return Accepted{}, &WindowClosedError{Phone: req.Phone}
	case errors.Is(err, record.ErrNoConversation):
		return Accepted{}, &InvalidError{Problems: []Problem{{Type: "missing", Loc: []any{"body", "messaging_account_id"},
			Msg: "Field required: " + req.Phone + " has never written to any of your numbers, so name the number to send from", Input: nil}}}
	case err != nil:
		return Accepted{}, fmt.Errorf("target reply: %w", err)
	}
	if m.BatchID != "" {
		// A retry of a publish that ended in doubt: the first attempt may be
		// in the stream (or recorded) with its message id; the 202 must name
		// that one.
		id, ok, err := s.store.PriorMessageID(ctx, m.CompanyID, m.BatchID)
		if err != nil {
			return Accepted{BatchID: m.BatchID}, fmt.Errorf("%w: %v", ErrPriorUnknown, err)
		}
		if ok {
			t.MessageID = id
		}
	}
	if !t.Connected {
		return Accepted{}, &InvalidError{Problems: []Problem{{Type: "account_disconnected", Loc: []any{"body", "messaging_account_id"},
			Msg: fmt.Sprintf("Messaging account %q is disconnected", t.AccountName), Input: t.AccountID}}}
	}
	msg := &sendsv1.ReplyBatch{
		BatchId: m.BatchID, CompanyId: m.CompanyID, MessageId: t.MessageID, Phone: req.Phone,
		MessagingAccountId: t.AccountID, AcceptedAt: timestamppb.New(s.now().UTC()),
		IdempotencyKey: m.IdempotencyKey, Source: string(cmp.Or(m.Source, bus.SourceMessagesSend)),
	}
	if req.Session != nil {
		if t.Window == nil || !t.Window.Open {
			return Accepted{}, &WindowClosedError{Phone: req.Phone, AccountName: t.AccountName, Window: t.Window}
		}
		session := *req.Session
		if err := s.quote(ctx, m.CompanyID, req.Phone, &session); err != nil {
			return Accepted{}, err
		}
		if msg.Session, err = json.Marshal(session); err != nil {
			return Accepted{}, fmt.Errorf("encode session message: %w", err)
		}
	} else {
		tpl, err := s.store.TemplateByName(ctx, m.CompanyID, req.Template.Name, req.Template.Language)
		switch {
		case errors.Is(err, catalog.ErrNotFound):
			return Accepted{}, ErrTemplateNotFound
		case errors.Is(err, ErrAmbiguous):
			return Accepted{}, &InvalidError{Problems: []Problem{{Type: "missing", Loc: []any{"body", "template", "language"},
				Msg: fmt.Sprintf("Field required: template %q exists in several languages", req.Template.Name), Input: nil}}}
		case err != nil:
			return Accepted{}, fmt.Errorf("find template %q: %w", req.Template.Name, err)
		}
		msg.TemplateId, msg.Variables = tpl.ID, req.Template.Variables
	}
	batchID, err := s.pub.Publish(ctx, bus.KindReplyBatches, m.CompanyID, m.BatchID, msg)
	if err != nil {
		return Accepted{BatchID: batchID}, err
	}
	return Accepted{BatchID: batchID, MessageID: t.MessageID}, nil
}

// quote turns the message a session message quotes (context) or reacts to
// into its wamid: it must be a message of this conversation, either way.
func (s *Service) quote(ctx context.Context, companyID int64, phone string, msg *whatsapp.Session) error {
	resolve := func(key string, loc []any) (string, error) {
		w, err := s.store.QuotedWamid(ctx, companyID, phone, key)
		if errors.Is(err, record.ErrNotFound) {
			return "", &InvalidError{Problems: []Problem{{Type: "message_not_found", Loc: loc,
				Msg: "No message of this conversation has this id or wamid (a message Parley sent has one once WhatsApp accepted it)", Input: key}}}
		}
		return w, err
	}
	if msg.Context != nil && msg.Context.MessageID != "" {
		c := *msg.Context
		var err error
		if c.MessageID, err = resolve(c.MessageID, []any{"body", "context", "message_id"}); err != nil {
			return err
		}
		msg.Context = &c
	}
	if msg.Reaction != nil {
		r := *msg.Reaction
		var err error
		if r.MessageID, err = resolve(r.MessageID, []any{"body", "reaction", "message_id"}); err != nil {
			return err
		}
		msg.Reaction = &r
	}
	return nil
}
