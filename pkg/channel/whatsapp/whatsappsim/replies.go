package whatsappsim

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

// Reply is a message a simulated user sends to a business number: a text,
// a tap on a template's quick-reply button, or any inbound message in the
// Cloud API's wire shape (Message). Playing it opens or extends the user's
// customer service window on that number, from its Timestamp.
type Reply struct {
	// PhoneNumberID is the business number, one the simulator serves.
	PhoneNumberID string `json:"phone_number_id"`
	// From is the user's number (digits, an optional leading '+').
	From string `json:"from"`
	// Name is the user's profile name (optional).
	Name string `json:"name,omitempty"`
	// Text makes a text message; ButtonPayload (and ButtonText) a button
	// message; Message any message. Exactly one of Text, ButtonPayload and
	// Message is given.
	Text          string `json:"text,omitempty"`
	ButtonPayload string `json:"button_payload,omitempty"`
	ButtonText    string `json:"button_text,omitempty"`
	// Message is one element of the webhook's value.messages[] without
	// from, id and timestamp (the simulator fills them from From, ID and
	// Timestamp): {"type":"image","image":{"mime_type":"image/jpeg",
	// "caption":"receipt"}}, {"type":"location","location":{...}},
	// "contacts", "reaction", "interactive" (button_reply, list_reply),
	// "sticker", "unsupported", "order", ... Media get an id, a sha256 and
	// a MIME type when they have none; unsupported gets Meta's 131051 error.
	Message json.RawMessage `json:"message,omitempty"`
	// Context is the wamid of the business message answered (optional).
	Context string `json:"context,omitempty"`
	// ID is the inbound message's wamid; empty makes a new one. Giving the
	// id of an earlier reply plays it again, as Meta repeats webhooks.
	ID string `json:"id,omitempty"`
	// Timestamp is when the user sent it, in Unix seconds; 0 is now. An old
	// timestamp opens a window that may already be closed.
	Timestamp int64 `json:"timestamp,omitempty"`
}

// ReplyResult is what became of a reply.
type ReplyResult struct {
	// ID is the inbound message's wamid.
	ID string `json:"id"`
	// ReceiverStatus and ReceiverBody are the webhook receiver's answer.
	ReceiverStatus int    `json:"receiver_status"`
	ReceiverBody   string `json:"receiver_body"`
}

// BatchResult is what became of replies posted in one webhook.
type BatchResult struct {
	// IDs are the inbound messages' wamids, in the order given.
	IDs []string `json:"ids"`
	// ReceiverStatus and ReceiverBody are the webhook receiver's answer.
	ReceiverStatus int    `json:"receiver_status"`
	ReceiverBody   string `json:"receiver_body"`
}

// Errors of Reply.
var (
	ErrBadReply       = errors.New("whatsappsim: bad reply")
	ErrUnknownAccount = errors.New("whatsappsim: no such account")
	ErrCallbacksOff   = errors.New("whatsappsim: callbacks are off: set a callback URL and app secret")
)

// maxReplyText is the Cloud API's longest text body.
const maxReplyText = 4096

// MaxReplyBatch is the most replies in one POST /_sim/replies/batch: Meta
// batches about as many messages in one webhook.
const MaxReplyBatch = 1000

// Validate reports what is wrong with a reply (ErrBadReply).
func (r Reply) Validate() error {
	_, err := r.wire("", 0)
	return err
}

// wire checks the reply and builds its element of value.messages[].
func (r Reply) wire(id string, ts int64) (json.RawMessage, error) {
	var errs []error
	if !validPhoneNumberID(r.PhoneNumberID) {
		errs = append(errs, errors.New("phone_number_id: want 1 to 32 digits"))
	}
	digits, ok := recipientDigits(r.From)
	if !ok {
		errs = append(errs, errors.New("from: want a phone number, 7 to 15 digits with an optional leading +"))
	}
	given := 0
	for _, set := range []bool{r.Text != "", r.ButtonPayload != "", len(r.Message) > 0} {
		if set {
			given++
		}
	}
	switch {
	case given != 1:
		errs = append(errs, errors.New("give exactly one of text, button_payload and message"))
	case utf8.RuneCountInString(r.Text) > maxReplyText || !utf8.ValidString(r.Text):
		errs = append(errs, fmt.Errorf("text: at most %d characters of UTF-8", maxReplyText))
	case len(r.ButtonPayload) > 256 || len(r.ButtonText) > 256:
		errs = append(errs, errors.New("button_payload and button_text: at most 256 bytes"))
	}
	if len(r.ID) > 256 {
		errs = append(errs, errors.New("id: at most 256 bytes"))
	}
	if r.Timestamp < 0 {
		errs = append(errs, errors.New("timestamp: Unix seconds, not negative"))
	}
	var m map[string]json.RawMessage
	if given == 1 && len(r.Message) > 0 {
		var err error
		if m, err = inboundMessage(r.Message, r.Context != ""); err != nil {
			errs = append(errs, fmt.Errorf("message: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadReply, err)
	}
	if m == nil {
		wm := whatsapp.WebhookMessage{}
		if r.Text != "" {
			wm.Type, wm.Text = whatsapp.MessageTypeText, &whatsapp.WebhookText{Body: r.Text}
		} else {
			wm.Type, wm.Button = whatsapp.MessageTypeButton, &whatsapp.WebhookButton{Payload: r.ButtonPayload, Text: r.ButtonText}
		}
		m = map[string]json.RawMessage{}
		raw, _ := json.Marshal(wm)
		_ = json.Unmarshal(raw, &m)
	}
	m["from"] = jsonString(digits)
	m["id"] = jsonString(id)
	m["timestamp"] = jsonString(strconv.FormatInt(ts, 10))
	if r.Context != "" {
		m["context"], _ = json.Marshal(whatsapp.WebhookContext{From: r.PhoneNumberID, ID: r.Context})
	}
	return json.Marshal(m)
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// defaultMIME is what a media message without a MIME type gets.
var defaultMIME = map[string]string{
	whatsapp.MessageTypeImage:    "image/jpeg",
	whatsapp.MessageTypeVideo:    "video/mp4",
	whatsapp.MessageTypeAudio:    "audio/ogg; codecs=opus",
	whatsapp.MessageTypeDocument: "application/pdf",
	whatsapp.MessageTypeSticker:  "image/webp",
}

// inboundMessage checks a message in the webhook's wire shape: the object
// of its type is there with what Meta always sends (a media id is filled
// when absent), and from, id and timestamp are left to the simulator.
func inboundMessage(raw json.RawMessage, hasContext bool) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, errors.New("want a JSON object")
	}
	for _, k := range []string{"from", "id", "timestamp"} {
		if _, ok := m[k]; ok {
			return nil, fmt.Errorf("%s is the simulator's: give from, id and timestamp beside message", k)
		}
	}
	if _, ok := m["context"]; ok && hasContext {
		return nil, errors.New("give context either beside message or in it")
	}
	var typ string
	if json.Unmarshal(m["type"], &typ) != nil || typ == "" {
		return nil, errors.New("type: a non-empty string")
	}
	var wm whatsapp.WebhookMessage
	if err := json.Unmarshal(raw, &wm); err != nil {
		return nil, fmt.Errorf("not in the webhook's shape: %w", err)
	}
	object := func(name string) (map[string]json.RawMessage, error) {
		var o map[string]json.RawMessage
		if json.Unmarshal(m[name], &o) != nil || o == nil {
			return nil, fmt.Errorf("type %s needs the %s object", name, name)
		}
		return o, nil
	}
	switch typ {
	case whatsapp.MessageTypeText:
		if wm.Text == nil || wm.Text.Body == "" || utf8.RuneCountInString(wm.Text.Body) > maxReplyText {
			return nil, fmt.Errorf("text.body: 1 to %d characters", maxReplyText)
		}
	case whatsapp.MessageTypeButton:
		if wm.Button == nil || wm.Button.Payload == "" && wm.Button.Text == "" {
			return nil, errors.New("button: a payload or a text")
		}
	case whatsapp.MessageTypeInteractive:
		in := wm.Interactive
		if in == nil || in.Type == "" {
			return nil, errors.New("interactive: an object with a type")
		}
		r := in.ButtonReply
		if in.Type == whatsapp.InteractiveListReply {
			r = in.ListReply
		}
		if (in.Type == whatsapp.InteractiveButtonReply || in.Type == whatsapp.InteractiveListReply) && (r == nil || r.ID == "" || r.Title == "") {
			return nil, fmt.Errorf("interactive.%s: an id and a title", in.Type)
		}
	case whatsapp.MessageTypeImage, whatsapp.MessageTypeVideo, whatsapp.MessageTypeAudio, whatsapp.MessageTypeDocument, whatsapp.MessageTypeSticker:
		o, err := object(typ)
		if err != nil {
			return nil, err
		}
		fillMedia(o, typ)
		m[typ], _ = json.Marshal(o)
	case whatsapp.MessageTypeLocation:
		o, err := object(typ)
		if err != nil {
			return nil, err
		}
		_, hasLat := o["latitude"]
		_, hasLong := o["longitude"]
		if l := wm.Location; !hasLat || !hasLong || l.Latitude < -90 || l.Latitude > 90 || l.Longitude < -180 || l.Longitude > 180 {
			return nil, errors.New("location: latitude (-90..90) and longitude (-180..180) are required")
		}
	case whatsapp.MessageTypeContacts:
		var cards []json.RawMessage
		if json.Unmarshal(wm.Contacts, &cards) != nil || len(cards) == 0 {
			return nil, errors.New("contacts: a non-empty array of contact cards")
		}
	case whatsapp.MessageTypeReaction:
		if wm.Reaction == nil || wm.Reaction.MessageID == "" {
			return nil, errors.New("reaction: a message_id")
		}
		if e := wm.Reaction.Emoji; e != "" && !whatsapp.IsSingleEmoji(e) {
			return nil, errors.New("reaction.emoji: one emoji, or empty for a removed reaction")
		}
	case whatsapp.MessageTypeUnsupported:
		if _, ok := m["errors"]; !ok {
			m["errors"], _ = json.Marshal([]whatsapp.WebhookError{{
				Code: 131051, Title: "Message type unknown", Message: "Message type unknown",
				ErrorData: &whatsapp.WebhookErrorData{Details: "Message type is currently not supported."},
			}})
		}
	}
	return m, nil
}

// fillMedia gives received media what Meta always sends: an id, a sha256
// (hex, as Meta's examples have it) and a MIME type.
func fillMedia(o map[string]json.RawMessage, typ string) {
	if _, ok := o["id"]; !ok {
		o["id"] = jsonString(strconv.FormatUint(1e15+mrand.Uint64N(9e15), 10))
	}
	if _, ok := o["sha256"]; !ok {
		sum := sha256.Sum256(o["id"])
		o["sha256"] = jsonString(hex.EncodeToString(sum[:]))
	}
	if _, ok := o["mime_type"]; !ok {
		o["mime_type"] = jsonString(defaultMIME[typ])
	}
}

// Reply posts a user's message to the callback URL in the webhook's real
// wire format (field messages, with the sender in contacts), signed like
// the status callbacks, and waits for the receiver's answer. The user's
// window opens whatever the receiver answers: the user did write.
func (s *Sim) Reply(ctx context.Context, r Reply) (ReplyResult, error) {
	res, err := s.ReplyBatch(ctx, []Reply{r})
	if err != nil {
		return ReplyResult{}, err
	}
	return ReplyResult{ID: res.IDs[0], ReceiverStatus: res.ReceiverStatus, ReceiverBody: res.ReceiverBody}, nil
}

// ReplyBatch posts several users' messages in one webhook (one entry per
// business number, its senders in contacts), as Meta batches them; at most
// MaxReplyBatch. Nothing is posted when one reply is bad.
func (s *Sim) ReplyBatch(ctx context.Context, replies []Reply) (BatchResult, error) {
	if len(replies) == 0 || len(replies) > MaxReplyBatch {
		return BatchResult{}, fmt.Errorf("%w: 1 to %d replies", ErrBadReply, MaxReplyBatch)
	}
	now := time.Now()
	msgs := make([]json.RawMessage, len(replies))
	ids := make([]string, len(replies))
	sent := make([]time.Time, len(replies))
	accounts := *s.accounts.Load()
	for i, r := range replies {
		id := r.ID
		if id == "" {
			id = s.ids.next()
		}
		ts := r.Timestamp
		sent[i] = time.Unix(ts, 0)
		if ts == 0 {
			ts, sent[i] = now.Unix(), now
		}
		raw, err := r.wire(id, ts)
		if err != nil {
			if len(replies) > 1 {
				err = fmt.Errorf("replies[%d]: %w", i, err)
			}
			return BatchResult{}, err
		}
		if accounts[r.PhoneNumberID] == nil {
			return BatchResult{}, fmt.Errorf("%w: %s", ErrUnknownAccount, r.PhoneNumberID)
		}
		msgs[i], ids[i] = raw, id
	}
	set := s.cbSet.Load()
	if set.URL == "" {
		return BatchResult{}, ErrCallbacksOff
	}
	window := s.Rules().ServiceWindow
	for i, r := range replies {
		digits, _ := recipientDigits(r.From)
		s.windows.touch(r.PhoneNumberID, digits, sent[i], now, window)
	}
	s.counts.inbound.Add(int64(len(replies)))

	body, err := json.Marshal(repliesPayload(replies, msgs))
	if err != nil {
		return BatchResult{}, fmt.Errorf("whatsappsim: encode reply: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cb.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, set.URL, bytes.NewReader(body))
	if err != nil {
		return BatchResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(whatsapp.SignatureHeader, whatsapp.Sign(set.AppSecret, body))
	resp, err := s.cb.client.Do(req)
	if err != nil {
		return BatchResult{}, fmt.Errorf("whatsappsim: post reply: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return BatchResult{IDs: ids, ReceiverStatus: resp.StatusCode, ReceiverBody: string(answer)}, nil
}

// The webhook of inbound messages; messages are raw so that any type
// (order, system, ...) goes out as given.
type inboundPayload struct {
	Object string         `json:"object"`
	Entry  []inboundEntry `json:"entry"`
}

type inboundEntry struct {
	ID      string          `json:"id"`
	Changes []inboundChange `json:"changes"`
}

type inboundChange struct {
	Value inboundValue `json:"value"`
	Field string       `json:"field"`
}

type inboundValue struct {
	MessagingProduct string                    `json:"messaging_product"`
	Metadata         whatsapp.WebhookMetadata  `json:"metadata"`
	Contacts         []whatsapp.WebhookContact `json:"contacts"`
	Messages         []json.RawMessage         `json:"messages"`
}

// repliesPayload groups the messages by business number (one entry each,
// the phone number id standing in for the WABA id and display number),
// each sender once in contacts with the first name given.
func repliesPayload(replies []Reply, msgs []json.RawMessage) inboundPayload {
	p := inboundPayload{Object: whatsapp.WebhookObject}
	entry := map[string]int{}
	senders := map[string]int{}
	for i, r := range replies {
		e, ok := entry[r.PhoneNumberID]
		if !ok {
			e = len(p.Entry)
			entry[r.PhoneNumberID] = e
			p.Entry = append(p.Entry, inboundEntry{ID: r.PhoneNumberID, Changes: []inboundChange{{Field: "messages", Value: inboundValue{
				MessagingProduct: whatsapp.MessagingProduct,
				Metadata:         whatsapp.WebhookMetadata{DisplayPhoneNumber: r.PhoneNumberID, PhoneNumberID: r.PhoneNumberID},
			}}}})
		}
		v := &p.Entry[e].Changes[0].Value
		digits, _ := recipientDigits(r.From)
		key := r.PhoneNumberID + ":" + digits
		if c, ok := senders[key]; !ok {
			senders[key] = len(v.Contacts)
			v.Contacts = append(v.Contacts, whatsapp.WebhookContact{Profile: whatsapp.WebhookProfile{Name: r.Name}, WaID: digits})
		} else if v.Contacts[c].Profile.Name == "" {
			v.Contacts[c].Profile.Name = r.Name
		}
		v.Messages = append(v.Messages, msgs[i])
	}
	return p
}

// replyStatus maps Reply's errors to the admin endpoint's answers: 400 for
// a bad reply, 404 for a number not served, 409 while callbacks are off,
// 502 when the receiver cannot be reached.
func replyStatus(err error) (int, string) {
	switch {
	case errors.Is(err, ErrBadReply):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, ErrUnknownAccount):
		return http.StatusNotFound, "no such account"
	case errors.Is(err, ErrCallbacksOff):
		return http.StatusConflict, err.Error()
	}
	return http.StatusBadGateway, err.Error()
}

// handleReply is POST /_sim/replies: 200 with the receiver's answer, or
// replyStatus's error.
func (s *Sim) handleReply(w http.ResponseWriter, r *http.Request) {
	var rp Reply
	if err := decodeStrict(r, &rp); err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	res, err := s.Reply(r.Context(), rp)
	if err != nil {
		status, detail := replyStatus(err)
		writeDetail(w, status, detail)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// handleReplyBatch is POST /_sim/replies/batch {"replies":[...]}: the
// replies in one webhook.
func (s *Sim) handleReplyBatch(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Replies []Reply `json:"replies"`
	}
	if err := decodeStrictN(r, &body, 16<<20); err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	res, err := s.ReplyBatch(r.Context(), body.Replies)
	if err != nil {
		status, detail := replyStatus(err)
		writeDetail(w, status, detail)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
