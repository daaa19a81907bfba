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
)

// SignatureHeader is the header in which Meta signs a webhook's body.
const SignatureHeader = "X-Hub-Signature-256"

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

// WebhookValue holds the statuses (and, for inbound messages, messages) of
// one phone number.
type WebhookValue struct {
	MessagingProduct string          `json:"messaging_product"`
	Metadata         WebhookMetadata `json:"metadata"`
	Statuses         []WebhookStatus `json:"statuses,omitempty"`
	// Messages are inbound messages, which Parley does not handle.
	Messages []json.RawMessage `json:"messages,omitempty"`
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
	Statuses []json.RawMessage `json:"statuses"`
}

// ParseStatusWebhook reads the statuses of a messages webhook, in payload
// order. Inbound messages, changes of other fields, statuses of unknown
// kinds and statuses without an id are skipped: Meta expects a 200 for the
// whole delivery, so one odd element must not fail the rest. The error is
// for a body that is not a WhatsApp webhook at all.
func ParseStatusWebhook(body []byte) ([]StatusUpdate, error) {
	var p rawPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotWhatsAppWebhook, err)
	}
	if p.Object != WebhookObject {
		return nil, fmt.Errorf("%w: object %q", ErrNotWhatsAppWebhook, p.Object)
	}
	var out []StatusUpdate
	for _, e := range p.Entry {
		for _, ch := range e.Changes {
			if ch.Field != "messages" || len(ch.Value) == 0 {
				continue
			}
			var v rawValue
			if json.Unmarshal(ch.Value, &v) != nil {
				continue
			}
			for _, rs := range v.Statuses {
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
				out = append(out, u)
			}
		}
	}
	return out, nil
}
