// Package whatsapp is the client of the WhatsApp Cloud API's message send
// (POST /{version}/{phone_number_id}/messages: template and session
// messages) and the types its webhooks carry (statuses, inbound messages). The dispatchers depend on the Sender interface; provider-sim
// speaks the same wire format on loopback.
package whatsapp

import (
	"context"
	"strconv"
	"time"
)

// Account is the sending phone number and its Bearer token (decrypted).
type Account struct {
	PhoneNumberID string
	AccessToken   string
}

// HeaderKind is the kind of a template's header.
type HeaderKind string

// Header kinds, as stored in templates.header_kind.
const (
	HeaderNone  HeaderKind = "none"
	HeaderText  HeaderKind = "text"
	HeaderImage HeaderKind = "image"
	HeaderVideo HeaderKind = "video"
)

// Binding says where one body parameter ({{n}}) takes its value from; it is
// one element of templates.body_parameters.
type Binding struct {
	// Source is first_name, last_name, phone, variable or literal.
	Source string `json:"source"`
	// Name is the trigger variable's name when Source is variable.
	Name string `json:"name,omitempty"`
	// Value is the text when Source is literal.
	Value string `json:"value,omitempty"`
	// Default is used when the bound value is missing or empty.
	Default string `json:"default,omitempty"`
}

// URLButton is a template URL button whose URL ends in a dynamic {{1}}.
type URLButton struct {
	// Base is the fixed part registered with the template, e.g. https://shop.example/o/
	Base string
	// DefaultSuffix is sent when the request gives no override.
	DefaultSuffix string
}

// Template is a stored template with how its parameters are filled.
type Template struct {
	Name           string
	Language       string
	HeaderKind     HeaderKind
	HeaderText     string
	HeaderMediaURL string
	BodyParameters []Binding
	// URLButtons has at most two entries: index 0 and 1 of the template's buttons.
	URLButtons []URLButton
}

// Recipient is one contact and what personalises its message.
type Recipient struct {
	Phone     string // E.164 with '+'
	FirstName string
	LastName  string
	Variables map[string]string
	// Per-contact media; they win over Overrides and the template default.
	ImageURL string
	VideoURL string
}

// Overrides are the request-level values of an automation trigger.
type Overrides struct {
	ImageURL string
	VideoURL string
	// URL and URL2 override the destination of the first and second URL
	// button: a value starting with the button's Base sends the rest as the
	// dynamic suffix; any other value is sent whole as the suffix.
	URL  string
	URL2 string
}

// Sender sends one message and returns the provider's message id (the
// wamid): a template message, or a session message (free-form, inside the
// customer service window) to a number in E.164. Errors are *Error when the
// provider answered, so that callers can Classify them.
type Sender interface {
	SendTemplate(ctx context.Context, acct Account, tpl Template, to Recipient, ov Overrides) (string, error)
	SendSession(ctx context.Context, acct Account, to string, msg Session) (string, error)
}

// Class is what the caller should do about a failed send.
type Class int

// Classes of failure.
const (
	// Retryable: throughput limit (130429), 5xx, timeouts, connection errors:
	// retry with exponential backoff and jitter.
	Retryable Class = iota + 1
	// RetryLater: pair rate limit (131056), too many messages to one user:
	// retry after a longer delay.
	RetryLater
	// Permanent: the recipient or template is wrong (131026, 131047, 131049,
	// 4xx other than the above); record the failure, never retry.
	Permanent
)

// String names the class for logs and metrics.
func (c Class) String() string {
	switch c {
	case Retryable:
		return "retryable"
	case RetryLater:
		return "retry_later"
	case Permanent:
		return "permanent"
	}
	return "unknown"
}

// Error is an answer of the provider that is not a success, in the Cloud
// API's error shape ({"error":{"message","type","code","error_subcode",
// "error_data","fbtrace_id"}}), or a transport failure (Code 0, HTTPStatus 0).
// It never carries the request body.
type Error struct {
	HTTPStatus int
	Code       int
	// Subcode is error_subcode (e.g. 33 with code 100: unknown phone number id).
	Subcode int
	Title   string
	Message string
	Class   Class
	// RetryAfter is a hint (from Retry-After, or the class's floor); zero if none.
	RetryAfter time.Duration
	// TraceID is fbtrace_id, what Meta's support asks for.
	TraceID string
	// Err is the transport failure (timeout, refused connection), if any.
	Err error
}

func (e *Error) Error() string {
	if e.Code == 0 {
		return "whatsapp: " + e.Message
	}
	s := "whatsapp: code " + strconv.Itoa(e.Code)
	if e.HTTPStatus != 0 {
		s += " (HTTP " + strconv.Itoa(e.HTTPStatus) + ")"
	}
	s += ": " + e.Title
	if e.Message != "" && e.Message != e.Title {
		s += ": " + e.Message
	}
	return s
}

// Unwrap gives errors.Is access to the transport failure, so that a caller
// can tell its own cancellation (context.Canceled) from a provider timeout.
func (e *Error) Unwrap() error { return e.Err }
