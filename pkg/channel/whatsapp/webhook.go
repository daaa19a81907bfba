package whatsapp

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley/pkg/phone"
)

// SignatureHeader is the header in which Meta signs a webhook's body.
const SignatureHeader = "X-Hub-Signature-256"

// DevAppSecret is the app secret of local development: the gateway's
// default PARLEY_WEBHOOK_APP_SECRET, which `make run` and docker-compose
// give provider-sim too. A deployment that still uses it is warned.
const DevAppSecret = "parley-local-webhook-secret"

// IsDevAppSecret reports whether secret is the local development secret.
func IsDevAppSecret(secret string) bool { return secret == DevAppSecret }

// WebhookObject is the object field of WhatsApp webhooks.
const WebhookObject = "whatsapp_business_account"

// Sign returns the X-Hub-Signature-256 value of body: "sha256=" and the hex
// HMAC-SHA256 of the raw body keyed by the app secret.
func Sign(appSecret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(appSecret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// VerifySignature reports whether header is the signature of body under
// appSecret. The comparison takes constant time; an empty secret never
// verifies, so that a missing configuration fails closed.
func VerifySignature(appSecret string, body []byte, header string) bool {
	if appSecret == "" {
		return false
	}
	got, ok := strings.CutPrefix(strings.TrimSpace(header), "sha256=")
	if !ok {
		return false
	}
	sum, err := hex.DecodeString(got)
	if err != nil || len(sum) != sha256.Size {
		return false
	}
	mac := hmac.New(sha256.New, []byte(appSecret))
	mac.Write(body)
	return hmac.Equal(sum, mac.Sum(nil))
}

// VerifySubscription answers the GET handshake by which Meta subscribes a
// webhook URL (hub.mode=subscribe, hub.verify_token, hub.challenge): ok is
// true when the mode is subscribe and the token matches (constant time);
// the caller then answers 200 with the challenge as text/plain, else 403.
// A challenge that is not a short token of letters, digits, '.', '_' or '-'
// (Meta sends digits) is refused, so the endpoint cannot reflect markup.
func VerifySubscription(q url.Values, verifyToken string) (challenge string, ok bool) {
	if verifyToken == "" || q.Get("hub.mode") != "subscribe" {
		return "", false
	}
	if subtle.ConstantTimeCompare([]byte(q.Get("hub.verify_token")), []byte(verifyToken)) != 1 {
		return "", false
	}
	challenge = q.Get("hub.challenge")
	if challenge == "" || len(challenge) > 128 {
		return "", false
	}
	for _, r := range challenge {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '.' || r == '_' || r == '-') {
			return "", false
		}
	}
	return challenge, true
}

// Status is the state a status webhook reports for a sent message.
type Status string

// Statuses of the Cloud API.
const (
	StatusSent      Status = "sent"
	StatusDelivered Status = "delivered"
	StatusRead      Status = "read"
	StatusFailed    Status = "failed"
)

// Rank orders statuses so that a message's state never moves backwards:
// a status replaces the recorded one only when it ranks higher (Supersedes).
//
//	unknown (and queued, sending, ...) 0 < sent 1 < failed 2 < delivered 3 < read 4
//
// failed ranks above sent (a send that Meta accepted and could not
// deliver fails) and below delivered: a failed that arrives after
// delivered or read never demotes the message, the caller keeps its error
// as a note; a delivered or read after failed wins, since the recipient's
// device answering is the stronger evidence. Webhooks arrive out of order
// (read before delivered happens), which is why the caller compares ranks
// instead of applying statuses as they come.
func (s Status) Rank() int {
	switch s {
	case StatusSent:
		return 1
	case StatusFailed:
		return 2
	case StatusDelivered:
		return 3
	case StatusRead:
		return 4
	}
	return 0
}

// Supersedes reports whether next replaces current under Rank.
func Supersedes(next, current Status) bool { return next.Rank() > current.Rank() }

// StatusUpdate is one status of one sent message, read from a webhook.
type StatusUpdate struct {
	// PhoneNumberID is the sending number (value.metadata.phone_number_id).
	PhoneNumberID string
	// MessageID is the wamid the send answered.
	MessageID string
	Status    Status
	// Timestamp is when the status happened on Meta's side (zero if the
	// payload's timestamp was unreadable).
	Timestamp time.Time
	// RecipientID is the recipient's WhatsApp id (digits).
	RecipientID string
	// Errors say why a failed message failed (131026, ...).
	Errors []StatusError
	// Pricing is how the message is billed, when the status carried it
	// (sent, delivered and read statuses do, since per-message pricing).
	Pricing *Pricing
}

// Pricing is a status's pricing object: billable (from its type when it has
// one: regular is charged, free_customer_service and free_entry_point are
// not; else its deprecated billable), the pricing category (marketing,
// utility, authentication, service, ...) and the pricing model (PMP: per
// message).
type Pricing struct {
	Billable bool
	Category string
	Model    string
}

// StatusError is one element of a status's errors.
type StatusError struct {
	Code    int
	Title   string
	Message string
	Details string
}

// The wire types of a messages webhook. Value is typed for building
// payloads (provider-sim); ParseStatusWebhook reads it leniently.

// WebhookPayload is the body Meta POSTs to the webhook URL.
type WebhookPayload struct {
	Object string         `json:"object"`
	Entry  []WebhookEntry `json:"entry"`
}

// WebhookEntry is the changes of one WhatsApp Business Account.
type WebhookEntry struct {
	ID      string          `json:"id"`
	Changes []WebhookChange `json:"changes"`
}

// WebhookChange is one change; Field is "messages" for statuses.
type WebhookChange struct {
	Value WebhookValue `json:"value"`
	Field string       `json:"field"`
}

// WebhookValue holds the statuses and the inbound messages of one phone
// number.
type WebhookValue struct {
	MessagingProduct string           `json:"messaging_product"`
	Metadata         WebhookMetadata  `json:"metadata"`
	Contacts         []WebhookContact `json:"contacts,omitempty"`
	Statuses         []WebhookStatus  `json:"statuses,omitempty"`
	// Messages are the messages users sent to the number.
	Messages []WebhookMessage `json:"messages,omitempty"`
}

// WebhookContact is the sender of inbound messages.
type WebhookContact struct {
	Profile WebhookProfile `json:"profile"`
	WaID    string         `json:"wa_id"`
}

// WebhookProfile is a sender's WhatsApp profile.
type WebhookProfile struct {
	Name string `json:"name"`
}

// WebhookMessage is one inbound message, in the Cloud API's wire shape:
// Type names the object that carries it (text, button, interactive, image,
// video, audio, document, sticker, location, contacts, reaction; order,
// system, unsupported and others are kept as unsupported when parsed).
type WebhookMessage struct {
	From        string              `json:"from"`
	ID          string              `json:"id"`
	Timestamp   string              `json:"timestamp"`
	Type        string              `json:"type"`
	Text        *WebhookText        `json:"text,omitempty"`
	Button      *WebhookButton      `json:"button,omitempty"`
	Interactive *WebhookInteractive `json:"interactive,omitempty"`
	Context     *WebhookContext     `json:"context,omitempty"`
	Image       *WebhookMedia       `json:"image,omitempty"`
	Video       *WebhookMedia       `json:"video,omitempty"`
	Audio       *WebhookMedia       `json:"audio,omitempty"`
	Document    *WebhookMedia       `json:"document,omitempty"`
	Sticker     *WebhookMedia       `json:"sticker,omitempty"`
	Location    *WebhookLocation    `json:"location,omitempty"`
	// Contacts are the contact cards the user shared (an array of
	// name, phones, emails, ... objects), kept as sent.
	Contacts json.RawMessage  `json:"contacts,omitempty"`
	Reaction *WebhookReaction `json:"reaction,omitempty"`
	// Errors come with type unsupported (131051 "Message type unknown").
	Errors []WebhookError `json:"errors,omitempty"`
}

// WebhookText is the body of a text message.
type WebhookText struct {
	Body string `json:"body"`
}

// WebhookButton is a tap on a template's quick-reply button.
type WebhookButton struct {
	Payload string `json:"payload"`
	Text    string `json:"text"`
}

// WebhookInteractive is the answer to an interactive message: Type is
// button_reply or list_reply (nfm_reply, a Flow's answer, is kept as
// unsupported).
type WebhookInteractive struct {
	Type        string              `json:"type"`
	ButtonReply *WebhookButtonReply `json:"button_reply,omitempty"`
	ListReply   *WebhookButtonReply `json:"list_reply,omitempty"`
}

// WebhookButtonReply is the chosen reply button, or list row (which also
// has a Description).
type WebhookButtonReply struct {
	ID          string `json:"id"`
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
}

// WebhookContext names the business message a reply answers.
type WebhookContext struct {
	From string `json:"from"`
	ID   string `json:"id"`
}

// WebhookMedia is received media: its id (to download it through the
// Graph API), MIME type and SHA-256; Caption for image, video and
// document, Filename for document, Animated for stickers, Voice for audio
// recorded as a voice note.
type WebhookMedia struct {
	ID       string `json:"id"`
	MimeType string `json:"mime_type"`
	SHA256   string `json:"sha256"`
	Caption  string `json:"caption,omitempty"`
	Filename string `json:"filename,omitempty"`
	Animated bool   `json:"animated,omitempty"`
	Voice    bool   `json:"voice,omitempty"`
}

// WebhookLocation is a location the user shared.
type WebhookLocation struct {
	Latitude  float64 `json:"latitude"`
	Longitude float64 `json:"longitude"`
	Name      string  `json:"name,omitempty"`
	Address   string  `json:"address,omitempty"`
	URL       string  `json:"url,omitempty"`
}

// WebhookReaction is a reaction to a business message; an empty (or
// absent) Emoji removes the user's reaction.
type WebhookReaction struct {
	MessageID string `json:"message_id"`
	Emoji     string `json:"emoji,omitempty"`
}

// WebhookMetadata names the business phone number.
type WebhookMetadata struct {
	DisplayPhoneNumber string `json:"display_phone_number"`
	PhoneNumberID      string `json:"phone_number_id"`
}

// WebhookStatus is one status of one message.
type WebhookStatus struct {
	ID           string               `json:"id"`
	Status       string               `json:"status"`
	Timestamp    string               `json:"timestamp"`
	RecipientID  string               `json:"recipient_id"`
	Conversation *WebhookConversation `json:"conversation,omitempty"`
	Pricing      *WebhookPricing      `json:"pricing,omitempty"`
	Errors       []WebhookError       `json:"errors,omitempty"`
}

// WebhookConversation is the conversation a message was billed in.
type WebhookConversation struct {
	ID                  string            `json:"id"`
	ExpirationTimestamp string            `json:"expiration_timestamp,omitempty"`
	Origin              map[string]string `json:"origin"`
}

// WebhookPricing is how a message was billed.
type WebhookPricing struct {
	Billable     bool   `json:"billable"`
	PricingModel string `json:"pricing_model"`
	Category     string `json:"category"`
	// Type is regular, free_customer_service or free_entry_point.
	Type string `json:"type,omitempty"`
}

// WebhookError is one error of a failed status.
type WebhookError struct {
	Code      int               `json:"code"`
	Title     string            `json:"title"`
	Message   string            `json:"message,omitempty"`
	ErrorData *WebhookErrorData `json:"error_data,omitempty"`
	Href      string            `json:"href,omitempty"`
}

// WebhookErrorData carries an error's details.
type WebhookErrorData struct {
	Details string `json:"details"`
}

// ErrNotWhatsAppWebhook is returned for a body that is not JSON or not a
// WhatsApp Business Account webhook.
var ErrNotWhatsAppWebhook = errors.New("whatsapp: not a WhatsApp webhook")

// lenient shapes: a change of another field (template status, account
// update) has another value shape and must not fail the whole payload.
type rawPayload struct {
	Object string `json:"object"`
	Entry  []struct {
		ID      string          `json:"id"`
		Time    json.RawMessage `json:"time"`
		Changes []struct {
			Field string          `json:"field"`
			Value json.RawMessage `json:"value"`
		} `json:"changes"`
	} `json:"entry"`
}

type rawValue struct {
	Metadata struct {
		PhoneNumberID string `json:"phone_number_id"`
	} `json:"metadata"`
	Contacts json.RawMessage `json:"contacts"`
	Statuses json.RawMessage `json:"statuses"`
	Messages json.RawMessage `json:"messages"`
}

// elements reads a JSON array leniently: anything that is not an array
// (absent, null, an object) is no elements, and malformed says so.
func elements(raw json.RawMessage) (els []json.RawMessage, malformed bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, false
	}
	if json.Unmarshal(raw, &els) != nil {
		return nil, true
	}
	return els, false
}

// InboundMessage is one message a user sent to a business number, as
// Parley reads it.
type InboundMessage struct {
	// PhoneNumberID is the business number it was sent to.
	PhoneNumberID string
	// ID is the inbound message's wamid.
	ID string
	// From is the sender's number, E.164 with '+'.
	From string
	// Timestamp is when the user sent it (zero if unreadable).
	Timestamp time.Time
	// Type is Content.Type: text, button, interactive, image, video, audio,
	// document, sticker, location, contacts, reaction or unsupported.
	Type string
	// Text is a text message's body.
	Text string
	// ButtonPayload is a quick-reply button's payload (type button) or the
	// id of an interactive reply button or list row.
	ButtonPayload string
	// ButtonText is the button's (or the row's) label.
	ButtonText string
	// ProfileName is the sender's WhatsApp profile name, if given.
	ProfileName string
	// ContextID is the business message this one answers (its wamid), if
	// any.
	ContextID string
	// Content is the message as Parley stores and forwards it: {"type": T,
	// T: {...}} with only the documented fields of that type (see
	// InboundContent). Never empty for a parsed message.
	Content InboundContent
}

// Webhook is what one delivery of the messages webhook carries.
type Webhook struct {
	Statuses []StatusUpdate
	Messages []InboundMessage
	// Malformed counts inbound messages (or messages arrays) that could not
	// be read: no id, no valid sender, no type, wrong shapes, a type Parley
	// reads without its object. They are skipped; the rest of the delivery
	// is processed.
	Malformed int
	// Account are the changes of the WhatsApp Business Account webhooks
	// about templates and numbers (AccountChange), in payload order; a
	// change whose value cannot be read is skipped.
	Account []AccountChange
}

// ParseStatusWebhook reads the statuses of a messages webhook, in payload
// order. Inbound messages, changes of other fields, statuses of unknown
// kinds and statuses without an id are skipped: Meta expects a 200 for the
// whole delivery, so one odd element must not fail the rest. The error is
// for a body that is not a WhatsApp webhook at all.
func ParseStatusWebhook(body []byte) ([]StatusUpdate, error) {
	w, err := ParseWebhook(body)
	return w.Statuses, err
}

// ParseWebhook reads the statuses and the inbound messages of a messages
// webhook, each in payload order. As for ParseStatusWebhook, an element that
// cannot be read is skipped (inbound ones are counted in Malformed) and never
// fails the others; the error is for a body that is not a WhatsApp webhook.
func ParseWebhook(body []byte) (Webhook, error) {
	var p rawPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return Webhook{}, fmt.Errorf("%w: %v", ErrNotWhatsAppWebhook, err)
	}
	if p.Object != WebhookObject {
		return Webhook{}, fmt.Errorf("%w: object %q", ErrNotWhatsAppWebhook, p.Object)
	}
	var w Webhook
	for _, e := range p.Entry {
		for _, ch := range e.Changes {
			if ch.Field != "messages" {
				if c, ok := accountChange(e.ID, e.Time, ch.Field, ch.Value); ok {
					w.Account = append(w.Account, c)
				}
				continue
			}
			if len(ch.Value) == 0 {
				continue
			}
			var v rawValue
			if json.Unmarshal(ch.Value, &v) != nil {
				continue
			}
			w.Messages, w.Malformed = inbound(v, w.Messages, w.Malformed)
			statuses, _ := elements(v.Statuses)
			for _, rs := range statuses {
				var s WebhookStatus
				if json.Unmarshal(rs, &s) != nil || s.ID == "" || Status(s.Status).Rank() == 0 {
					continue
				}
				u := StatusUpdate{
					PhoneNumberID: v.Metadata.PhoneNumberID,
					MessageID:     s.ID,
					Status:        Status(s.Status),
					RecipientID:   s.RecipientID,
				}
				if sec, err := strconv.ParseInt(s.Timestamp, 10, 64); err == nil {
					u.Timestamp = time.Unix(sec, 0).UTC()
				}
				for _, we := range s.Errors {
					se := StatusError{Code: we.Code, Title: we.Title, Message: we.Message}
					if we.ErrorData != nil {
						se.Details = we.ErrorData.Details
					}
					u.Errors = append(u.Errors, se)
				}
				if p := s.Pricing; p != nil && p.Category != "" {
					// Per-message pricing deprecates billable for type:
					// regular is charged, free_customer_service and
					// free_entry_point are not.
					billable := p.Billable
					if p.Type != "" {
						billable = p.Type == "regular"
					}
					u.Pricing = &Pricing{Billable: billable, Category: p.Category, Model: p.PricingModel}
				}
				w.Statuses = append(w.Statuses, u)
			}
		}
	}
	return w, nil
}

// inbound appends the readable inbound messages of one value.
func inbound(v rawValue, out []InboundMessage, malformed int) ([]InboundMessage, int) {
	msgs, bad := elements(v.Messages)
	if bad {
		return out, malformed + 1
	}
	var contacts []WebhookContact
	if len(v.Contacts) > 0 {
		_ = json.Unmarshal(v.Contacts, &contacts)
	}
	for _, rm := range msgs {
		var m WebhookMessage
		if json.Unmarshal(rm, &m) != nil || m.ID == "" || v.Metadata.PhoneNumberID == "" {
			malformed++
			continue
		}
		from, ok := phone.Normalize(m.From)
		if !ok {
			malformed++
			continue
		}
		content, ok := readContent(&m)
		if !ok {
			malformed++
			continue
		}
		in := InboundMessage{PhoneNumberID: v.Metadata.PhoneNumberID, ID: m.ID, From: from, Type: content.Type, Content: content}
		if sec, err := strconv.ParseInt(m.Timestamp, 10, 64); err == nil && sec > 0 {
			in.Timestamp = time.Unix(sec, 0).UTC()
		}
		if m.Context != nil {
			in.ContextID = m.Context.ID
		}
		switch {
		case content.Text != nil:
			in.Text = content.Text.Body
		case content.Button != nil:
			in.ButtonPayload, in.ButtonText = content.Button.Payload, content.Button.Text
		case content.Interactive != nil:
			in.ButtonPayload, in.ButtonText = content.Interactive.ID, content.Interactive.Title
		}
		for _, c := range contacts {
			if c.WaID == from[1:] {
				in.ProfileName = c.Profile.Name
			}
		}
		out = append(out, in)
	}
	return out, malformed
}
