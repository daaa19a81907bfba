package whatsapp

import (
	"encoding/json"
	"strconv"
	"time"
)

// AccountChange is one change of a WhatsApp Business Account webhook that
// is not about messages: exactly one of its values is set, by Field.
type AccountChange struct {
	// WABAID is the account the change is about (entry.id).
	WABAID string
	// At is when it happened (entry.time; zero when absent).
	At    time.Time
	Field string

	TemplateStatus     *TemplateStatusUpdate
	TemplateQuality    *TemplateQualityUpdate
	TemplateCategory   *TemplateCategoryUpdate
	PhoneNumberQuality *PhoneNumberQualityUpdate
}

// accountChange reads one change of the four account fields Parley keeps;
// ok is false for another field or a value that cannot be read.
func accountChange(waba string, at json.RawMessage, field string, value json.RawMessage) (AccountChange, bool) {
	c := AccountChange{WABAID: waba, Field: field}
	if sec, err := strconv.ParseInt(string(at), 10, 64); err == nil && sec > 0 {
		c.At = time.Unix(sec, 0).UTC()
	}
	var target any
	switch field {
	case FieldTemplateStatus:
		c.TemplateStatus = &TemplateStatusUpdate{}
		target = c.TemplateStatus
	case FieldTemplateQuality:
		c.TemplateQuality = &TemplateQualityUpdate{}
		target = c.TemplateQuality
	case FieldTemplateCategory:
		c.TemplateCategory = &TemplateCategoryUpdate{}
		target = c.TemplateCategory
	case FieldPhoneNumberQuality:
		c.PhoneNumberQuality = &PhoneNumberQualityUpdate{}
		target = c.PhoneNumberQuality
	default:
		return AccountChange{}, false
	}
	if waba == "" || len(value) == 0 || json.Unmarshal(value, target) != nil {
		return AccountChange{}, false
	}
	return c, true
}
