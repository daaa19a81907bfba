package whatsappsim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

// Reply is a message a simulated user sends to a business number: a text,
// or a tap on a template's quick-reply button.
type Reply struct {
	// PhoneNumberID is the business number, one the simulator serves.
	PhoneNumberID string `json:"phone_number_id"`
	// From is the user's number (digits, an optional leading '+').
	From string `json:"from"`
	// Name is the user's profile name (optional).
	Name string `json:"name,omitempty"`
	// Text makes a text message; ButtonPayload (and ButtonText) a button
	// message. Exactly one of Text and ButtonPayload is given.
	Text          string `json:"text,omitempty"`
	ButtonPayload string `json:"button_payload,omitempty"`
	ButtonText    string `json:"button_text,omitempty"`
	// Context is the wamid of the business message answered (optional).
	Context string `json:"context,omitempty"`
	// Timestamp is when the user sent it, in Unix seconds; 0 is now.
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

// Errors of Reply.
var (
	ErrBadReply       = errors.New("whatsappsim: bad reply")
	ErrUnknownAccount = errors.New("whatsappsim: no such account")
	ErrCallbacksOff   = errors.New("whatsappsim: callbacks are off: set a callback URL and app secret")
)

// maxReplyText is the Cloud API's longest text body.
const maxReplyText = 4096

// Validate reports what is wrong with a reply (ErrBadReply).
func (r Reply) Validate() error {
	var errs []error
	if !validPhoneNumberID(r.PhoneNumberID) {
		errs = append(errs, errors.New("phone_number_id: want 1 to 32 digits"))
	}
	if _, ok := recipientDigits(r.From); !ok {
		errs = append(errs, errors.New("from: want a phone number, 7 to 15 digits with an optional leading +"))
	}
	switch {
	case (r.Text == "") == (r.ButtonPayload == ""):
		errs = append(errs, errors.New("give exactly one of text and button_payload"))
	case utf8.RuneCountInString(r.Text) > maxReplyText || !utf8.ValidString(r.Text):
		errs = append(errs, fmt.Errorf("text: at most %d characters of UTF-8", maxReplyText))
	case len(r.ButtonPayload) > 256 || len(r.ButtonText) > 256:
		errs = append(errs, errors.New("button_payload and button_text: at most 256 bytes"))
	}
	if r.Timestamp < 0 {
		errs = append(errs, errors.New("timestamp: Unix seconds, not negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrBadReply, err)
	}
	return nil
}

// Reply posts a user's message to the callback URL in the webhook's real
// wire format (field messages, with the sender in contacts), signed like
// the status callbacks, and waits for the receiver's answer.
func (s *Sim) Reply(ctx context.Context, r Reply) (ReplyResult, error) {
	if err := r.Validate(); err != nil {
		return ReplyResult{}, err
	}
	if (*s.accounts.Load())[r.PhoneNumberID] == nil {
		return ReplyResult{}, fmt.Errorf("%w: %s", ErrUnknownAccount, r.PhoneNumberID)
	}
	set := s.cbSet.Load()
	if set.URL == "" {
		return ReplyResult{}, ErrCallbacksOff
	}
	digits, _ := recipientDigits(r.From)
	ts := r.Timestamp
	if ts == 0 {
		ts = time.Now().Unix()
	}
	id := s.ids.next()
	m := whatsapp.WebhookMessage{From: digits, ID: id, Timestamp: strconv.FormatInt(ts, 10)}
	if r.Text != "" {
		m.Type, m.Text = "text", &whatsapp.WebhookText{Body: r.Text}
	} else {
		m.Type, m.Button = "button", &whatsapp.WebhookButton{Payload: r.ButtonPayload, Text: r.ButtonText}
	}
	if r.Context != "" {
		m.Context = &whatsapp.WebhookContext{From: r.PhoneNumberID, ID: r.Context}
	}
	p := whatsapp.WebhookPayload{Object: whatsapp.WebhookObject, Entry: []whatsapp.WebhookEntry{{
		ID: r.PhoneNumberID,
		Changes: []whatsapp.WebhookChange{{Field: "messages", Value: whatsapp.WebhookValue{
			MessagingProduct: whatsapp.MessagingProduct,
			Metadata:         whatsapp.WebhookMetadata{DisplayPhoneNumber: r.PhoneNumberID, PhoneNumberID: r.PhoneNumberID},
			Contacts:         []whatsapp.WebhookContact{{Profile: whatsapp.WebhookProfile{Name: r.Name}, WaID: digits}},
			Messages:         []whatsapp.WebhookMessage{m},
		}}},
	}}}
	body, err := json.Marshal(p)
	if err != nil {
		return ReplyResult{}, fmt.Errorf("whatsappsim: encode reply: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cb.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, set.URL, bytes.NewReader(body))
	if err != nil {
		return ReplyResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(whatsapp.SignatureHeader, whatsapp.Sign(set.AppSecret, body))
	resp, err := s.cb.client.Do(req)
	if err != nil {
		return ReplyResult{}, fmt.Errorf("whatsappsim: post reply: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return ReplyResult{ID: id, ReceiverStatus: resp.StatusCode, ReceiverBody: string(answer)}, nil
}

// handleReply is POST /_sim/replies: 200 with the receiver's answer, 400
// for a bad reply, 404 for a number not served, 409 while callbacks are
// off, 502 when the receiver cannot be reached.
func (s *Sim) handleReply(w http.ResponseWriter, r *http.Request) {
	var rp Reply
	if err := decodeStrict(r, &rp); err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	res, err := s.Reply(r.Context(), rp)
	switch {
	case errors.Is(err, ErrBadReply):
		writeDetail(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, ErrUnknownAccount):
		writeDetail(w, http.StatusNotFound, "no such account")
	case errors.Is(err, ErrCallbacksOff):
		writeDetail(w, http.StatusConflict, err.Error())
	case err != nil:
		writeDetail(w, http.StatusBadGateway, err.Error())
	default:
		writeJSON(w, http.StatusOK, res)
	}
}
