package validation

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/parleyhq/parley/pkg/phone"
)

// Limits of the spec (section 8).
const (
	MaxContacts       = 1000
	MaxNameLength     = 255
	MaxURLLength      = 2048
	MaxVarKeyLength   = 100
	MaxVarValueLength = 4096
	MaxScheduledAt    = 64
)

// UnknownID is what an identifier decodes to when it is a valid Python int
// outside int64 (pydantic accepts any size). No row has id 0 (identity
// columns start at 1), so the lookup answers 404 as it should.
const UnknownID int64 = 0

// PhonePattern is the spec's phone pattern, matched on ASCII digits only:
// pydantic's \d would also take other scripts' digits, which E.164 does not
// have. Such a number gets pydantic's own pattern error.
var PhonePattern = Pattern{Text: phone.Pattern, Match: phone.Valid}

// URLPattern is the spec's URL pattern, with rust-regex semantics: \S is
// any character outside Unicode White_Space, $ is the end of the string.
var URLPattern = Pattern{Text: `^https?://\S+$`, Match: matchHTTPURL}

func matchHTTPURL(s string) bool {
	var rest string
	switch {
	case strings.HasPrefix(s, "https://"):
		rest = s[len("https://"):]
	case strings.HasPrefix(s, "http://"):
		rest = s[len("http://"):]
	default:
		return false
	}
	if rest == "" {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if c := rest[i]; c < utf8.RuneSelf {
			if c == ' ' || (c >= '\t' && c <= '\r') {
				return false
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(rest[i:])
		if unicode.IsSpace(r) { // Unicode White_Space, as rust-regex's \s
			return false
		}
		i += size - 1
	}
	return true
}

func (i Integer) id() int64 {
	if i.Big {
		return UnknownID
	}
	return i.Value
}

// CampaignSend is the body of POST /api/campaigns/send (spec 4.2).
type CampaignSend struct {
	// CampaignID is UnknownID for integers outside int64.
	CampaignID int64
	// Contacts are the numbers as sent, duplicates included.
	Contacts []string
	IsForced bool
	// ScheduledAt is nil for an immediate send; a value sent without offset
	// is taken as UTC.
	ScheduledAt *time.Time
}

var (
	phoneString = String(StringRules{Pattern: &PhonePattern})
	urlString   = OrNull(String(StringRules{MaxLength: MaxURLLength, Pattern: &URLPattern}))
	nameString  = OrNull(String(StringRules{MaxLength: MaxNameLength}))
)

var campaignSendModel = NewModel(
	Required("campaign_id", Int(), func(r *CampaignSend, v Integer) { r.CampaignID = v.id() }),
	Required("contacts", ListOf(phoneString, MaxContacts), func(r *CampaignSend, v []string) { r.Contacts = v }),
	Optional("is_forced", Bool(), func(r *CampaignSend, v bool) { r.IsForced = v }),
	Optional("scheduled_at", OrNull(DateTimeString(MaxScheduledAt)), func(r *CampaignSend, v Null[time.Time]) {
		if v.Valid {
			t := v.V
			r.ScheduledAt = &t
		}
	}),
)

// DecodeCampaignSend validates a JSON campaign send body. The error is an
// *Errors (422) or ErrBodyUnparseable (400); see Decode.
func DecodeCampaignSend(body []byte) (CampaignSend, error) {
	return Decode(campaignSendModel, body)
}

// AutomationTrigger is the body of POST /api/automations/send (spec 2.2).
type AutomationTrigger struct {
	// AutomationID is UnknownID for integers outside int64.
	AutomationID int64
	// Contacts are all contacts sent (up to MaxContacts); the caller
	// processes the first 50.
	Contacts []AutomationContact
	ImageURL Null[string]
	VideoURL Null[string]
	URL      Null[string]
	URL2     Null[string]
}

// AutomationContact is one element of AutomationTrigger.Contacts (spec 2.3).
type AutomationContact struct {
	Phone     string
	FirstName Null[string]
	LastName  Null[string]
	ImageURL  Null[string]
	VideoURL  Null[string]
	// Variables are in the order sent, a repeated key once with its last
	// value; nil when absent or null, empty (not nil) for {}.
	Variables Pairs
}

var automationContactModel = NewModel(
	Required("phone", phoneString, func(c *AutomationContact, v string) { c.Phone = v }),
	Optional("first_name", nameString, func(c *AutomationContact, v Null[string]) { c.FirstName = v }),
	Optional("last_name", nameString, func(c *AutomationContact, v Null[string]) { c.LastName = v }),
	Optional("image_url", urlString, func(c *AutomationContact, v Null[string]) { c.ImageURL = v }),
	Optional("video_url", urlString, func(c *AutomationContact, v Null[string]) { c.VideoURL = v }),
	Optional("variables",
		OrNull(StringMap(StringRules{MaxLength: MaxVarKeyLength}, StringRules{MaxLength: MaxVarValueLength})),
		func(c *AutomationContact, v Null[Pairs]) { c.Variables = v.V }),
)

var automationTriggerModel = NewModel(
	Required("automation_id", Int(), func(r *AutomationTrigger, v Integer) { r.AutomationID = v.id() }),
	Required("contacts", ListOf[AutomationContact](automationContactModel, MaxContacts),
		func(r *AutomationTrigger, v []AutomationContact) { r.Contacts = v }),
	Optional("image_url", urlString, func(r *AutomationTrigger, v Null[string]) { r.ImageURL = v }),
	Optional("video_url", urlString, func(r *AutomationTrigger, v Null[string]) { r.VideoURL = v }),
	Optional("url", urlString, func(r *AutomationTrigger, v Null[string]) { r.URL = v }),
	Optional("url2", urlString, func(r *AutomationTrigger, v Null[string]) { r.URL2 = v }),
)

// DecodeAutomationTrigger validates a JSON automation trigger body. The
// error is an *Errors (422) or ErrBodyUnparseable (400); see Decode.
func DecodeAutomationTrigger(body []byte) (AutomationTrigger, error) {
	return Decode(automationTriggerModel, body)
}
