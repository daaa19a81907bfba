package whatsapp

import "encoding/json"

// The wire types of template management (the Graph API's
// /{version}/{waba_id}/message_templates) and of the WhatsApp Business
// Account webhooks about templates and messaging limits, as Meta documents
// them ("Message Templates API", "Template management", and the webhook
// references message_template_status_update, message_template_quality_update,
// template_category_update and phone_number_quality_update). provider-sim
// builds them; a client reads them.

// Template categories.
const (
	CategoryMarketing      = "MARKETING"
	CategoryUtility        = "UTILITY"
	CategoryAuthentication = "AUTHENTICATION"
)

// Template statuses (a template's status, and the event of a
// message_template_status_update webhook).
const (
	TemplatePending  = "PENDING"
	TemplateApproved = "APPROVED"
	TemplateRejected = "REJECTED"
	TemplatePaused   = "PAUSED"
	TemplateDisabled = "DISABLED"
)

// Template quality scores; UNKNOWN is "quality pending".
const (
	QualityUnknown = "UNKNOWN"
	QualityGreen   = "GREEN"
	QualityYellow  = "YELLOW"
	QualityRed     = "RED"
)

// Messaging limit tiers of a business portfolio: the unique users it may
// reach outside a customer service window in a moving 24 hours (Meta,
// "Messaging limits", since October 2025 per portfolio).
const (
	Tier250       = "TIER_250"
	Tier2K        = "TIER_2K"
	Tier10K       = "TIER_10K"
	Tier100K      = "TIER_100K"
	TierUnlimited = "TIER_UNLIMITED"
)

// TierLimit is a tier's number of unique users; 0 for TierUnlimited. ok is
// false for a value that is not a tier.
func TierLimit(tier string) (limit int, ok bool) {
	switch tier {
	case Tier250:
		return 250, true
	case Tier2K:
		return 2_000, true
	case Tier10K:
		return 10_000, true
	case Tier100K:
		return 100_000, true
	case TierUnlimited:
		return 0, true
	}
	return 0, false
}

// The fields (changes[].field) of the WhatsApp Business Account webhooks
// about templates and phone numbers.
const (
	FieldTemplateStatus     = "message_template_status_update"
	FieldTemplateQuality    = "message_template_quality_update"
	FieldTemplateCategory   = "template_category_update"
	FieldPhoneNumberQuality = "phone_number_quality_update"
)

// TemplateDefinition is the body of POST /{version}/{waba_id}/message_templates.
type TemplateDefinition struct {
	Name     string `json:"name"`
	Language string `json:"language"`
	// Category is MARKETING, UTILITY or AUTHENTICATION.
	Category string `json:"category"`
	// ParameterFormat is POSITIONAL ({{1}}) or NAMED ({{first_name}}).
	ParameterFormat     string              `json:"parameter_format,omitempty"`
	AllowCategoryChange bool                `json:"allow_category_change,omitempty"`
	Components          []TemplateComponent `json:"components"`
}

// TemplateComponent is one part of a template definition: HEADER (with a
// Format: TEXT, IMAGE, VIDEO, DOCUMENT, LOCATION), BODY, FOOTER or BUTTONS.
type TemplateComponent struct {
	Type    string           `json:"type"`
	Format  string           `json:"format,omitempty"`
	Text    string           `json:"text,omitempty"`
	Buttons []TemplateButton `json:"buttons,omitempty"`
	// Example holds sample values (header_text, body_text, header_handle,
	// ...), kept as given.
	Example json.RawMessage `json:"example,omitempty"`
	// AddSecurityRecommendation (BODY) and CodeExpirationMinutes (FOOTER)
	// belong to AUTHENTICATION templates.
	AddSecurityRecommendation bool `json:"add_security_recommendation,omitempty"`
	CodeExpirationMinutes     int  `json:"code_expiration_minutes,omitempty"`
}

// TemplateButton is one button of a BUTTONS component: QUICK_REPLY, URL
// (a dynamic URL ends in {{1}}), PHONE_NUMBER, COPY_CODE, OTP (with an
// OTPType), FLOW.
type TemplateButton struct {
	Type        string          `json:"type"`
	Text        string          `json:"text,omitempty"`
	URL         string          `json:"url,omitempty"`
	PhoneNumber string          `json:"phone_number,omitempty"`
	OTPType     string          `json:"otp_type,omitempty"`
	Example     json.RawMessage `json:"example,omitempty"`
}

// TemplateCreated is the answer to a template's creation.
type TemplateCreated struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Category string `json:"category"`
}

// MessageTemplate is one template as GET /{version}/{waba_id}/message_templates
// lists it.
type MessageTemplate struct {
	ID              string              `json:"id"`
	Name            string              `json:"name"`
	Language        string              `json:"language"`
	Status          string              `json:"status"`
	Category        string              `json:"category"`
	ParameterFormat string              `json:"parameter_format,omitempty"`
	Components      []TemplateComponent `json:"components"`
	// RejectedReason is why a REJECTED template was (NONE otherwise).
	RejectedReason string                `json:"rejected_reason,omitempty"`
	QualityScore   *TemplateQualityScore `json:"quality_score,omitempty"`
}

// TemplateQualityScore is a template's quality: GREEN, YELLOW, RED or
// UNKNOWN, and when it was rated (Unix seconds).
type TemplateQualityScore struct {
	Score string `json:"score"`
	Date  int64  `json:"date,omitempty"`
}

// TemplateList is a page of templates in the Graph API's paging shape.
type TemplateList struct {
	Data   []MessageTemplate `json:"data"`
	Paging *GraphPaging      `json:"paging,omitempty"`
}

// GraphPaging is the Graph API's cursor paging: Next (Previous) is the URL
// of the following (preceding) page, absent on the last (first) one.
type GraphPaging struct {
	Cursors  GraphCursors `json:"cursors"`
	Next     string       `json:"next,omitempty"`
	Previous string       `json:"previous,omitempty"`
}

// GraphCursors are the opaque cursors of a page's first and last items.
type GraphCursors struct {
	Before string `json:"before"`
	After  string `json:"after"`
}

// AccountWebhook is a WhatsApp Business Account webhook whose changes are
// not messages: each change's Value is read according to its Field.
type AccountWebhook struct {
	Object string                `json:"object"`
	Entry  []AccountWebhookEntry `json:"entry"`
}

// AccountWebhookEntry is the changes of one WhatsApp Business Account (ID)
// at Time (Unix seconds).
type AccountWebhookEntry struct {
	ID      string                 `json:"id"`
	Time    int64                  `json:"time"`
	Changes []AccountWebhookChange `json:"changes"`
}

// AccountWebhookChange is one change: Field names the shape of Value
// (TemplateStatusUpdate, TemplateQualityUpdate, TemplateCategoryUpdate,
// PhoneNumberQualityUpdate).
type AccountWebhookChange struct {
	Value json.RawMessage `json:"value"`
	Field string          `json:"field"`
}

// TemplateStatusUpdate is the value of message_template_status_update.
type TemplateStatusUpdate struct {
	// Event is the new status: APPROVED, REJECTED, PAUSED, DISABLED, ...
	Event             string `json:"event"`
	MessageTemplateID int64  `json:"message_template_id"`
	// MessageTemplateName and MessageTemplateLanguage identify the template.
	MessageTemplateName     string `json:"message_template_name"`
	MessageTemplateLanguage string `json:"message_template_language"`
	// Reason is a rejection's reason (INVALID_FORMAT, ...), NONE otherwise.
	Reason                  string               `json:"reason"`
	MessageTemplateCategory string               `json:"message_template_category,omitempty"`
	DisableInfo             *TemplateDisableInfo `json:"disable_info,omitempty"`
	OtherInfo               *TemplateOtherInfo   `json:"other_info,omitempty"`
}

// TemplateDisableInfo says when a DISABLED template was disabled (Unix
// seconds).
type TemplateDisableInfo struct {
	DisableDate int64 `json:"disable_date"`
}

// TemplateOtherInfo explains a pause or its end: Title is FIRST_PAUSE,
// SECOND_PAUSE or UNPAUSE.
type TemplateOtherInfo struct {
	Title       string `json:"title"`
	Description string `json:"description"`
}

// TemplateQualityUpdate is the value of message_template_quality_update.
type TemplateQualityUpdate struct {
	PreviousQualityScore    string `json:"previous_quality_score"`
	NewQualityScore         string `json:"new_quality_score"`
	MessageTemplateID       int64  `json:"message_template_id"`
	MessageTemplateName     string `json:"message_template_name"`
	MessageTemplateLanguage string `json:"message_template_language"`
}

// TemplateCategoryUpdate is the value of template_category_update for a
// completed change.
type TemplateCategoryUpdate struct {
	MessageTemplateID       int64  `json:"message_template_id"`
	MessageTemplateName     string `json:"message_template_name"`
	MessageTemplateLanguage string `json:"message_template_language"`
	PreviousCategory        string `json:"previous_category"`
	NewCategory             string `json:"new_category"`
}

// PhoneNumberQualityUpdate is the value of phone_number_quality_update: a
// number's messaging limit changed. The tier fields carry the same tier
// (TIER_2K, ...): CurrentLimit is deprecated by Meta in favour of
// MaxDailyConversationsPerBusiness, and WhatsAppBusinessManagerMessagingLimit
// is the portfolio's limit as the phone number's field of that name reads it.
type PhoneNumberQualityUpdate struct {
	DisplayPhoneNumber string `json:"display_phone_number"`
	// Event is UPGRADE, DOWNGRADE, FLAGGED, UNFLAGGED, ...
	Event                                 string `json:"event"`
	OldLimit                              string `json:"old_limit,omitempty"`
	CurrentLimit                          string `json:"current_limit"`
	MaxDailyConversationsPerBusiness      string `json:"max_daily_conversations_per_business"`
	WhatsAppBusinessManagerMessagingLimit string `json:"whatsapp_business_manager_messaging_limit"`
}
