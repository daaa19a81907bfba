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

// CampaignSend is the body of POST /api/campaigns/send (spec 4.2), which
// names its recipients with contacts or, instead, with segment_id.
type CampaignSend struct {
	// CampaignID is UnknownID for integers outside int64.
	CampaignID int64
	// Contacts are the numbers as sent, duplicates included; nil when the
	// send names a segment.
	Contacts []string
	// SegmentID is set when the send names a segment (UnknownID for an
	// integer outside int64).
	SegmentID *int64
	IsForced  bool
	// ScheduledAt is nil for an immediate send; a value sent without offset
	// is taken as UTC.
	ScheduledAt *time.Time
}

var (
	phoneString = String(StringRules{Pattern: &PhonePattern})
	urlString   = OrNull(String(StringRules{MaxLength: MaxURLLength, Pattern: &URLPattern}))
	nameString  = OrNull(String(StringRules{MaxLength: MaxNameLength}))
)

func scheduledAt(dst **time.Time, v Null[time.Time]) {
	if v.Valid {
		t := v.V
		*dst = &t
	}
}

// campaignSendModel: contacts is required unless segment_id is given
// (present, not null); both given is one contacts_and_segment item.
var campaignSendModel = NewModel(
	Required("campaign_id", Int(), func(r *CampaignSend, v Integer) { r.CampaignID = v.id() }),
	RequiredUnless("contacts", "segment_id", ListOf(phoneString, MaxContacts), func(r *CampaignSend, v []string) {
		if v == nil {
			v = []string{}
		}
		r.Contacts = v
	}),
	Optional("segment_id", OrNull(Int()), func(r *CampaignSend, v Null[Integer]) {
		if v.Valid {
			id := v.V.id()
			r.SegmentID = &id
		}
	}),
	Optional("is_forced", Bool(), func(r *CampaignSend, v bool) { r.IsForced = v }),
	Optional("scheduled_at", OrNull(DateTimeString(MaxScheduledAt)), func(r *CampaignSend, v Null[time.Time]) {
		scheduledAt(&r.ScheduledAt, v)
	}),
).After(func(r *CampaignSend) *CustomError {
	if r.Contacts != nil && r.SegmentID != nil {
		return &CustomError{Type: "contacts_and_segment", Msg: "Give either contacts or segment_id, not both"}
	}
	return nil
})

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
	Optional("variables", variablesMap, func(c *AutomationContact, v Null[Pairs]) { c.Variables = v.V }),
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

// MaxSegmentName is the longest segment name, after trimming.
const MaxSegmentName = 255

// SegmentContact is one contact of a segment request: the automation
// trigger's contact without its per-send media overrides (image_url and
// video_url, which a segment has no use for, are ignored like any other
// extra key).
type SegmentContact struct {
	Phone     string
	FirstName Null[string]
	LastName  Null[string]
	// Variables are as in AutomationContact.
	Variables Pairs
}

// SegmentCreate is the body of POST /api/segments/create.
type SegmentCreate struct {
	// Name is trimmed of surrounding white space, 1 to 255 characters.
	Name     string
	Contacts []SegmentContact
}

// SegmentContacts is POST /api/segments/{segment_id}/contacts: its path
// parameter and body.
type SegmentContacts struct {
	// SegmentID is UnknownID for integers outside int64.
	SegmentID int64
	Contacts  []SegmentContact
}

var (
	segmentName         = String(StringRules{Strip: true, MinLength: 1, MaxLength: MaxSegmentName})
	segmentContactModel = NewModel(
		Required("phone", phoneString, func(c *SegmentContact, v string) { c.Phone = v }),
		Optional("first_name", nameString, func(c *SegmentContact, v Null[string]) { c.FirstName = v }),
		Optional("last_name", nameString, func(c *SegmentContact, v Null[string]) { c.LastName = v }),
		Optional("variables", variablesMap, func(c *SegmentContact, v Null[Pairs]) { c.Variables = v.V }),
	)
	segmentCreateModel = NewModel(
		Required("name", segmentName, func(r *SegmentCreate, v string) { r.Name = v }),
		Optional("contacts", ListOf[SegmentContact](segmentContactModel, MaxContacts),
			func(r *SegmentCreate, v []SegmentContact) { r.Contacts = v }),
	)
	segmentContactsModel = NewModel(
		Required("contacts", ListOf[SegmentContact](segmentContactModel, MaxContacts),
			func(r *SegmentContacts, v []SegmentContact) { r.Contacts = v }),
	)
)

// DecodeSegmentCreate validates a JSON segment creation body.
func DecodeSegmentCreate(body []byte) (SegmentCreate, error) {
	return Decode(segmentCreateModel, body)
}

// DecodeSegmentContacts validates POST /api/segments/{segment_id}/contacts
// as FastAPI would with segment_id declared an int: the path parameter's
// items come before the body's (loc ["path","segment_id"]). isJSON is
// IsJSONContentType of the request.
func DecodeSegmentContacts(segmentID string, body []byte, isJSON bool) (SegmentContacts, error) {
	id, path := pathInt("segment_id", segmentID)
	if !isJSON {
		return SegmentContacts{}, nonJSONBody(body, path)
	}
	r, err := decodeBody(segmentContactsModel, body, path)
	r.SegmentID = id
	return r, err
}

// SegmentRename is the body of PATCH /api/segments/{segment_id}.
type SegmentRename struct {
	// Name is as in SegmentCreate.
	Name string
}

// SegmentRemove is the body of DELETE /api/segments/{segment_id}/contacts:
// the phones of the members to remove, as sent.
type SegmentRemove struct {
	Contacts []string
}

var (
	segmentRenameModel = NewModel(
		Required("name", segmentName, func(r *SegmentRename, v string) { r.Name = v }),
	)
	segmentRemoveModel = NewModel(
		Required("contacts", ListOf(phoneString, MaxContacts), func(r *SegmentRemove, v []string) { r.Contacts = v }),
	)
)

// DecodeSegmentRename validates a JSON segment rename body.
func DecodeSegmentRename(body []byte) (SegmentRename, error) {
	return Decode(segmentRenameModel, body)
}

// DecodeSegmentRemove validates a JSON body of phones to remove from a
// segment.
func DecodeSegmentRemove(body []byte) (SegmentRemove, error) {
	return Decode(segmentRemoveModel, body)
}

// BatchSend is the body of POST /api/batch/send.
type BatchSend struct {
	Messages []BatchMessage
	IsForced bool
	// ScheduledAt is as in CampaignSend.
	ScheduledAt *time.Time
}

// BatchMessage is one message of a batch send. Exactly one target is set:
// CampaignID, or TemplateID with AccountID (identifiers outside int64 are
// UnknownID).
type BatchMessage struct {
	Phone      string
	CampaignID *int64
	TemplateID *int64
	AccountID  *int64
	FirstName  Null[string]
	LastName   Null[string]
	Variables  Pairs
	ImageURL   Null[string]
	VideoURL   Null[string]
	URL        Null[string]
	URL2       Null[string]
}

var variablesMap = OrNull(StringMap(StringRules{MaxLength: MaxVarKeyLength}, StringRules{MaxLength: MaxVarValueLength}))

func idField(name string, dst func(*BatchMessage) **int64) Field[BatchMessage] {
	return Optional(name, OrNull(Int()), func(m *BatchMessage, v Null[Integer]) {
		if v.Valid {
			id := v.V.id()
			*dst(m) = &id
		}
	})
}

var (
	batchMessageModel = NewModel(
		Required("phone", phoneString, func(m *BatchMessage, v string) { m.Phone = v }),
		idField("campaign_id", func(m *BatchMessage) **int64 { return &m.CampaignID }),
		idField("template_id", func(m *BatchMessage) **int64 { return &m.TemplateID }),
		idField("messaging_account_id", func(m *BatchMessage) **int64 { return &m.AccountID }),
		Optional("first_name", nameString, func(m *BatchMessage, v Null[string]) { m.FirstName = v }),
		Optional("last_name", nameString, func(m *BatchMessage, v Null[string]) { m.LastName = v }),
		Optional("variables", variablesMap, func(m *BatchMessage, v Null[Pairs]) { m.Variables = v.V }),
		Optional("image_url", urlString, func(m *BatchMessage, v Null[string]) { m.ImageURL = v }),
		Optional("video_url", urlString, func(m *BatchMessage, v Null[string]) { m.VideoURL = v }),
		Optional("url", urlString, func(m *BatchMessage, v Null[string]) { m.URL = v }),
		Optional("url2", urlString, func(m *BatchMessage, v Null[string]) { m.URL2 = v }),
	).After(func(m *BatchMessage) *CustomError {
		switch {
		case m.CampaignID != nil && (m.TemplateID != nil || m.AccountID != nil):
			return &CustomError{Type: "batch_message_target", Msg: "Give campaign_id, or template_id and messaging_account_id, not both"}
		case m.CampaignID == nil && (m.TemplateID == nil || m.AccountID == nil):
			return &CustomError{Type: "batch_message_target", Msg: "Give campaign_id, or template_id and messaging_account_id"}
		}
		return nil
	})
	batchSendModel = NewModel(
		Required("messages", ListOf[BatchMessage](batchMessageModel, MaxContacts),
			func(r *BatchSend, v []BatchMessage) { r.Messages = v }),
		Optional("is_forced", Bool(), func(r *BatchSend, v bool) { r.IsForced = v }),
		Optional("scheduled_at", OrNull(DateTimeString(MaxScheduledAt)), func(r *BatchSend, v Null[time.Time]) {
			scheduledAt(&r.ScheduledAt, v)
		}),
	)
)

// DecodeBatchSend validates a JSON batch send body.
func DecodeBatchSend(body []byte) (BatchSend, error) {
	return Decode(batchSendModel, body)
}

// ConnectorSend is the body of POST /api/{connector}/send: the automation
// trigger without automation_id (the connector names its target).
type ConnectorSend struct {
	Contacts []AutomationContact
	ImageURL Null[string]
	VideoURL Null[string]
	URL      Null[string]
	URL2     Null[string]
}

var connectorSendModel = NewModel(
	Required("contacts", ListOf[AutomationContact](automationContactModel, MaxContacts),
		func(r *ConnectorSend, v []AutomationContact) { r.Contacts = v }),
	Optional("image_url", urlString, func(r *ConnectorSend, v Null[string]) { r.ImageURL = v }),
	Optional("video_url", urlString, func(r *ConnectorSend, v Null[string]) { r.VideoURL = v }),
	Optional("url", urlString, func(r *ConnectorSend, v Null[string]) { r.URL = v }),
	Optional("url2", urlString, func(r *ConnectorSend, v Null[string]) { r.URL2 = v }),
)

// DecodeConnectorSend validates a JSON connector send body.
func DecodeConnectorSend(body []byte) (ConnectorSend, error) {
	return Decode(connectorSendModel, body)
}

// Reply is the envelope of POST /api/messages: who it goes to, from which
// number, and its type. The type's own object (text, image, interactive,
// template...) is validated against the Cloud API's limits by the caller
// (whatsapp.Session.Validate), after this model holds.
type Reply struct {
	To string
	// AccountID is nil when absent or null (UnknownID beyond int64).
	AccountID *int64
	Type      string
}

var replyModel = NewModel(
	Required("to", phoneString, func(r *Reply, v string) { r.To = v }),
	Optional("messaging_account_id", OrNull(Int()), func(r *Reply, v Null[Integer]) {
		if v.Valid {
			id := v.V.id()
			r.AccountID = &id
		}
	}),
	Required("type", String(StringRules{MinLength: 1, MaxLength: 32}), func(r *Reply, v string) { r.Type = v }),
)

// DecodeReply validates the envelope of a JSON reply body.
func DecodeReply(body []byte) (Reply, error) {
	return Decode(replyModel, body)
}
