package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/contacts"
	"github.com/parleyhq/parley/pkg/events"
)

// Window is the 24-hour customer service window of a contact on one of the
// company's numbers: open until ExpiresAt, which each message the contact
// sends to that number moves to 24 hours after it.
type Window struct {
	MessagingAccountID   int64     `json:"messaging_account_id"`
	MessagingAccountName string    `json:"messaging_account_name"`
	LastInboundAt        time.Time `json:"last_inbound_at"`
	ExpiresAt            time.Time `json:"expires_at"`
	Open                 bool      `json:"open"`
}

func windowAt(accountID int64, name string, last, now time.Time) Window {
	w := Window{MessagingAccountID: accountID, MessagingAccountName: name, LastInboundAt: last, ExpiresAt: last.Add(ServiceWindow)}
	w.Open = now.Before(w.ExpiresAt)
	return w
}

// Windows returns the windows of a company's contact, one per number the
// contact wrote to, the most recent first; none when it never wrote.
func Windows(ctx context.Context, db DB, companyID int64, phone string, now time.Time) ([]Window, error) {
	rows, err := db.Query(ctx, `
		SELECT w.messaging_account_id, a.name, w.last_inbound_at
		FROM conversation_windows w JOIN messaging_accounts a ON a.id = w.messaging_account_id
		WHERE w.company_id = $1 AND w.phone = $2
		ORDER BY w.last_inbound_at DESC, w.messaging_account_id`, companyID, phone)
	if err != nil {
		return nil, fmt.Errorf("windows of %s: %w", phone, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Window, error) {
		var id int64
		var name string
		var last time.Time
		err := r.Scan(&id, &name, &last)
		return windowAt(id, name, last, now), err
	})
	if err != nil {
		return nil, fmt.Errorf("windows of %s: %w", phone, err)
	}
	if out == nil {
		out = []Window{}
	}
	return out, nil
}

// ContactView is a company's contact as GET /api/contacts/{phone} shows
// it: the address book's fields, its consent with its history, and its
// conversations' windows.
type ContactView struct {
	contacts.Contact
	OptedOut      bool                    `json:"opted_out"`
	OptOutHistory []contacts.ConsentEvent `json:"opt_out_history"`
	Windows       []Window                `json:"windows"`
}

// Contact returns the company's contact of phone; ErrNotFound when the
// company has none.
func Contact(ctx context.Context, db DB, companyID int64, phone string, now time.Time) (ContactView, error) {
	store := contacts.NewStore(db, func() time.Time { return now })
	c, err := store.ByPhone(ctx, companyID, phone)
	if errors.Is(err, contacts.ErrNotFound) || errors.Is(err, contacts.ErrInvalidPhone) {
		return ContactView{}, fmt.Errorf("contact %s: %w", phone, ErrNotFound)
	}
	if err != nil {
		return ContactView{}, err
	}
	v := ContactView{Contact: c, OptedOut: c.OptedOut()}
	if v.OptOutHistory, err = store.OptOutHistory(ctx, companyID, c.ID); err != nil {
		return ContactView{}, err
	}
	if v.OptOutHistory == nil {
		v.OptOutHistory = []contacts.ConsentEvent{}
	}
	if v.Windows, err = Windows(ctx, db, companyID, c.Phone, now); err != nil {
		return ContactView{}, err
	}
	return v, nil
}

// Inbound is a message a contact sent, as the conversation lists it.
type Inbound struct {
	ID int64 `json:"message_id"`
	// Direction is "inbound".
	Direction            string  `json:"direction"`
	Phone                string  `json:"phone"`
	Wamid                *string `json:"wamid"`
	MessagingAccountID   int64   `json:"messaging_account_id"`
	MessagingAccountName string  `json:"messaging_account_name"`
	Type                 string  `json:"type"`
	// Content is {"type": T, T: {...}} (whatsapp.InboundContent); null once
	// the contact was erased.
	Content json.RawMessage `json:"content"`
	// Summary is one line of it for people: the text, "[image] caption"...
	Summary    string          `json:"summary"`
	Context    *events.Context `json:"context,omitempty"`
	SentAt     time.Time       `json:"sent_at"`
	ReceivedAt time.Time       `json:"received_at"`
}

// inboundSelect reads an inbound message; a query adds its own columns
// with inboundWith.
const inboundSelect = `
	SELECT i.id, i.phone, i.wamid, i.messaging_account_id, a.name, i.type, i.content,
		COALESCE(i.context_wamid, ''), COALESCE(i.context_message_id, 0), COALESCE(i.context_batch_id::text, ''),
		i.sent_at, i.received_at %s
	FROM inbound_messages i JOIN messaging_accounts a ON a.id = i.messaging_account_id`

// scanInbound scans inboundSelect's columns, then extra.
func scanInbound(row pgx.Row, extra ...any) (Inbound, error) {
	in := Inbound{Direction: DirectionInbound}
	var ctxWamid, ctxBatch string
	var ctxID int64
	var content []byte
	err := row.Scan(append([]any{&in.ID, &in.Phone, &in.Wamid, &in.MessagingAccountID, &in.MessagingAccountName, &in.Type, &content,
		&ctxWamid, &ctxID, &ctxBatch, &in.SentAt, &in.ReceivedAt}, extra...)...)
	if err != nil {
		return in, err
	}
	if ctxWamid != "" {
		in.Context = &events.Context{Wamid: ctxWamid, MessageID: ctxID, BatchID: ctxBatch}
	}
	in.Content = json.RawMessage("null")
	in.Summary = "[erased]"
	if len(content) > 0 {
		in.Content = content
		var c whatsapp.InboundContent
		if json.Unmarshal(content, &c) == nil {
			in.Summary = c.Summary()
		}
	}
	return in, nil
}

// InboundByID finds the company's inbound message by its id; ErrNotFound
// when there is none.
func InboundByID(ctx context.Context, db DB, companyID, id int64) (Inbound, error) {
	return findInbound(ctx, db, `i.id = $1 AND i.company_id = $2`, id, companyID)
}

// InboundByWamid finds the company's inbound message by its wamid.
func InboundByWamid(ctx context.Context, db DB, companyID int64, wamid string) (Inbound, error) {
	return findInbound(ctx, db, `i.wamid = $1 AND i.company_id = $2`, wamid, companyID)
}

func findInbound(ctx context.Context, db DB, where string, key any, companyID int64) (Inbound, error) {
	in, err := scanInbound(db.QueryRow(ctx, fmt.Sprintf(inboundSelect, "")+` WHERE `+where, key, companyID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Inbound{}, fmt.Errorf("inbound message %v: %w", key, ErrNotFound)
	}
	if err != nil {
		return Inbound{}, fmt.Errorf("find inbound message %v: %w", key, err)
	}
	return in, nil
}

// The directions of a conversation's messages.
const (
	DirectionInbound  = "inbound"
	DirectionOutbound = "outbound"
)

// Entry is one message of a conversation: one Parley sent (Out) or one the
// contact sent (In). Its JSON is the message's own, with its direction.
type Entry struct {
	Out *Found
	In  *Inbound
}

// ID is the message's id (one sequence numbers both directions).
func (e Entry) ID() int64 {
	if e.In != nil {
		return e.In.ID
	}
	return e.Out.ID
}

// MarshalJSON writes the message of either direction.
func (e Entry) MarshalJSON() ([]byte, error) {
	if e.In != nil {
		return json.Marshal(e.In)
	}
	return json.Marshal(e.Out)
}

// UnmarshalJSON reads what MarshalJSON wrote (parleyctl reads the API).
func (e *Entry) UnmarshalJSON(b []byte) error {
	var d struct {
		Direction string `json:"direction"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return err
	}
	if d.Direction == DirectionInbound {
		e.In, e.Out = &Inbound{}, nil
		return json.Unmarshal(b, e.In)
	}
	e.In, e.Out = nil, &Found{}
	return json.Unmarshal(b, e.Out)
}

// ReplyTarget is what a reply to a contact needs to know before it is
// accepted: the number it goes from, that number's window with the contact,
// the wamid of the message it quotes, and the message id it will have.
type ReplyTarget struct {
	AccountID   int64
	AccountName string
	Connected   bool
	// Window is nil when the contact never wrote to that number.
	Window *Window
	// MessageID is the reply's id, taken from the messages' sequence.
	MessageID int64
}

// ErrNoConversation is a reply without a number to a contact who never
// wrote to any of the company's numbers.
var ErrNoConversation = errors.New("no conversation with this contact")

// TargetReply decides where a reply to phone goes from and takes its id, in
// one statement: accountID when given (ErrNotFound when the company has no
// such account), else the number the contact wrote to last
// (ErrNoConversation when it never wrote).
func TargetReply(ctx context.Context, db DB, companyID int64, phone string, accountID int64, now time.Time) (ReplyTarget, error) {
	var t ReplyTarget
	var last *time.Time
	err := db.QueryRow(ctx, `
		SELECT t.*, nextval('messages_id_seq') FROM (
			SELECT a.id, a.name, a.connected, w.last_inbound_at
			FROM messaging_accounts a
			LEFT JOIN conversation_windows w ON w.messaging_account_id = a.id AND w.phone = $2
			WHERE a.company_id = $1 AND ($3::bigint = 0 OR a.id = $3) AND ($3::bigint <> 0 OR w.phone IS NOT NULL)
			ORDER BY w.last_inbound_at DESC NULLS LAST, a.id
			LIMIT 1
		) t`, companyID, phone, accountID).Scan(&t.AccountID, &t.AccountName, &t.Connected, &last, &t.MessageID)
	switch {
	case errors.Is(err, pgx.ErrNoRows) && accountID != 0:
		return ReplyTarget{}, fmt.Errorf("messaging account %d: %w", accountID, ErrNotFound)
	case errors.Is(err, pgx.ErrNoRows):
		return ReplyTarget{}, fmt.Errorf("%s: %w", phone, ErrNoConversation)
	case err != nil:
		return ReplyTarget{}, fmt.Errorf("target a reply to %s: %w", phone, err)
	}
	if last != nil {
		w := windowAt(t.AccountID, t.AccountName, *last, now)
		t.Window = &w
	}
	return t, nil
}

// QuotedWamid is the wamid of the company's message key (Parley's id of a
// message either way, or a wamid) with phone, for a reply's context:
// ErrNotFound when the company has no such message with that contact, or
// when Parley's message was never accepted by WhatsApp (it has no wamid).
func QuotedWamid(ctx context.Context, db DB, companyID int64, phone, key string) (string, error) {
	id, _ := strconv.ParseInt(key, 10, 64)
	if strings.HasPrefix(key, "+") || strings.HasPrefix(key, "-") {
		id = 0
	}
	var wamid *string
	err := db.QueryRow(ctx, `
		SELECT wamid FROM (
			SELECT provider_message_id AS wamid FROM messages
			WHERE company_id = $1 AND phone = $2 AND (id = $3 OR provider_message_id = $4)
			UNION ALL
			SELECT wamid FROM inbound_messages
			WHERE company_id = $1 AND phone = $2 AND (id = $3 OR wamid = $4)
		) m LIMIT 1`, companyID, phone, id, key).Scan(&wamid)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && wamid == nil {
		return "", fmt.Errorf("message %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("find message %s: %w", key, err)
	}
	return *wamid, nil
}

// Conversation is one contact's conversation on one number, as the
// Conversations list shows it: who, the last thing they sent, the window.
type Conversation struct {
	Phone       string `json:"phone"`
	ProfileName string `json:"profile_name,omitempty"`
	FirstName   string `json:"first_name,omitempty"`
	LastName    string `json:"last_name,omitempty"`
	Window
	LastMessage Inbound `json:"last_message"`
}

// ConversationPage is a page of conversations, the most recent first.
type ConversationPage struct {
	Conversations []Conversation `json:"conversations"`
	NextCursor    *string        `json:"next_cursor"`
}

// ConversationFilter pages the conversations.
type ConversationFilter struct {
	Limit  int
	Cursor string
}

// Conversations lists a page of the company's conversations, the one whose
// contact wrote last first. The position is the last listed conversation's
// newest inbound message id: unique (one sequence), and in the order the
// messages were recorded.
func Conversations(ctx context.Context, db DB, companyID int64, f ConversationFilter, now time.Time) (ConversationPage, error) {
	limit, err := pageSize(f.Limit, DefaultPhoneLimit, MaxPhoneLimit)
	if err != nil {
		return ConversationPage{}, err
	}
	var after int64
	if f.Cursor != "" {
		var ok bool
		if after, ok = cursorInt("conversations", f.Cursor, 1); !ok {
			return ConversationPage{}, &InvalidError{Field: "cursor", Input: f.Cursor, Msg: "cursor is not one this listing gave"}
		}
	}
	rows, err := db.Query(ctx, fmt.Sprintf(inboundSelect, `, w.last_inbound_at, COALESCE(c.profile_name, ''),
		COALESCE(c.first_name, ''), COALESCE(c.last_name, '')`)+`
		JOIN conversation_windows w ON w.last_inbound_id = i.id
		LEFT JOIN contacts c ON c.company_id = w.company_id AND c.phone = w.phone
		WHERE w.company_id = $1 AND ($2::bigint = 0 OR w.last_inbound_id < $2)
		ORDER BY w.last_inbound_id DESC
		LIMIT $3`, companyID, after, limit+1)
	if err != nil {
		return ConversationPage{}, fmt.Errorf("list conversations: %w", err)
	}
	convs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Conversation, error) {
		var c Conversation
		var last time.Time
		in, err := scanInbound(r, &last, &c.ProfileName, &c.FirstName, &c.LastName)
		c.Phone, c.LastMessage = in.Phone, in
		c.Window = windowAt(in.MessagingAccountID, in.MessagingAccountName, last, now)
		return c, err
	})
	if err != nil {
		return ConversationPage{}, fmt.Errorf("list conversations: %w", err)
	}
	p := ConversationPage{Conversations: convs}
	if len(convs) > limit {
		p.Conversations = convs[:limit]
		next := encodeCursor("conversations", strconv.FormatInt(p.Conversations[limit-1].LastMessage.ID, 10))
		p.NextCursor = &next
	}
	if p.Conversations == nil {
		p.Conversations = []Conversation{}
	}
	return p, nil
}

// FindMessage finds the company's message of either direction by Parley's
// id (digits) or its wamid; ErrNotFound when there is none.
func FindMessage(ctx context.Context, db DB, companyID int64, key string) (Entry, error) {
	id, err := strconv.ParseInt(key, 10, 64)
	byID := err == nil && id > 0 && strconv.FormatInt(id, 10) == key
	var f Found
	if byID {
		f, err = MessageByID(ctx, db, companyID, id)
	} else {
		f, err = MessageByWamid(ctx, db, companyID, key)
	}
	if err == nil {
		return Entry{Out: &f}, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return Entry{}, err
	}
	var in Inbound
	if byID {
		in, err = InboundByID(ctx, db, companyID, id)
	} else {
		in, err = InboundByWamid(ctx, db, companyID, key)
	}
	if err != nil {
		return Entry{}, err
	}
	return Entry{In: &in}, nil
}
