package httpapi

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/parleyhq/parley/pkg/contacts"
	"github.com/parleyhq/parley/services/gateway/internal/sends"
	"github.com/parleyhq/parley/services/gateway/internal/validation"
)

// decodeJSON runs a body through the schema the way FastAPI would: a body
// whose Content-Type says it is not JSON is validated as raw text (and fails).
func decodeJSON[T any](body []byte, contentType string, decode func([]byte) (T, error)) (T, error) {
	if contentType != "" && !validation.IsJSONContentType(contentType) {
		var zero T
		return zero, validation.NonJSONBody(body)
	}
	return decode(body)
}

// writeDecodeError answers the schema's 422 (byte-compatible with the spec's
// FastAPI service) or its 400 for a body that is not text.
func writeDecodeError(c *gin.Context, err error) {
	var verr *validation.Errors
	switch {
	case errors.As(err, &verr):
		writeJSON(c, http.StatusUnprocessableEntity, verr.Body())
		c.Abort()
	case errors.Is(err, validation.ErrBodyUnparseable):
		abortDetail(c, http.StatusBadRequest, msgBadBody)
	default:
		abortDetail(c, http.StatusInternalServerError, msgInternal)
	}
}

func decodeCampaignSend(body []byte, contentType string) (sends.CampaignSend, error) {
	r, err := decodeJSON(body, contentType, validation.DecodeCampaignSend)
	if err != nil {
		return sends.CampaignSend{}, err
	}
	return sends.CampaignSend{CampaignID: r.CampaignID, Contacts: r.Contacts, SegmentID: r.SegmentID,
		IsForced: r.IsForced, ScheduledAt: r.ScheduledAt}, nil
}

func decodeAutomationTrigger(body []byte, contentType string) (sends.AutomationTrigger, error) {
	r, err := decodeJSON(body, contentType, validation.DecodeAutomationTrigger)
	if err != nil {
		return sends.AutomationTrigger{}, err
	}
	return sends.AutomationTrigger{
		AutomationID: r.AutomationID,
		Contacts:     automationContacts(r.Contacts),
		ImageURL:     r.ImageURL.V, VideoURL: r.VideoURL.V, URL: r.URL.V, URL2: r.URL2.V,
	}, nil
}

func automationContacts(in []validation.AutomationContact) []sends.AutomationContact {
	out := make([]sends.AutomationContact, len(in))
	for i, c := range in {
		out[i] = sends.AutomationContact{Phone: c.Phone, ImageURL: c.ImageURL.V, VideoURL: c.VideoURL.V,
			FirstName: name(c.FirstName), LastName: name(c.LastName), Variables: variables(c.Variables)}
	}
	return out
}

// name is a given name, nil when absent or null ("not given").
func name(v validation.Null[string]) *string {
	if !v.Valid {
		return nil
	}
	s := v.V
	return &s
}

func variables(ps validation.Pairs) map[string]string {
	if ps == nil {
		return nil
	}
	return ps.Map()
}

func decodeBatchSend(body []byte, contentType string) (sends.BatchSend, error) {
	r, err := decodeJSON(body, contentType, validation.DecodeBatchSend)
	if err != nil {
		return sends.BatchSend{}, err
	}
	out := sends.BatchSend{Messages: make([]sends.BatchMessage, len(r.Messages)), IsForced: r.IsForced, ScheduledAt: r.ScheduledAt}
	for i, m := range r.Messages {
		bm := sends.BatchMessage{Phone: m.Phone, ByCampaign: m.CampaignID != nil,
			FirstName: name(m.FirstName), LastName: name(m.LastName), Variables: variables(m.Variables),
			ImageURL: m.ImageURL.V, VideoURL: m.VideoURL.V, URL: m.URL.V, URL2: m.URL2.V}
		if bm.ByCampaign {
			bm.CampaignID = *m.CampaignID
		} else {
			bm.TemplateID, bm.AccountID = *m.TemplateID, *m.AccountID // the schema requires both
		}
		out.Messages[i] = bm
	}
	return out, nil
}

func decodeConnectorSend(body []byte, contentType string) (sends.ConnectorSend, error) {
	r, err := decodeJSON(body, contentType, validation.DecodeConnectorSend)
	if err != nil {
		return sends.ConnectorSend{}, err
	}
	return sends.ConnectorSend{Contacts: automationContacts(r.Contacts),
		ImageURL: r.ImageURL.V, VideoURL: r.VideoURL.V, URL: r.URL.V, URL2: r.URL2.V}, nil
}

// segmentCreate and segmentContacts are the segment requests as the use
// case takes them.
type segmentCreate struct {
	name    string
	members []contacts.Upsert
}

type segmentContacts struct {
	segmentID int64
	members   []contacts.Upsert
}

func members(in []validation.SegmentContact) []contacts.Upsert {
	out := make([]contacts.Upsert, len(in))
	for i, c := range in {
		out[i] = contacts.Upsert{Phone: c.Phone, FirstName: name(c.FirstName), LastName: name(c.LastName), Variables: variables(c.Variables)}
	}
	return out
}

func decodeSegmentCreate(body []byte, contentType string) (segmentCreate, error) {
	r, err := decodeJSON(body, contentType, validation.DecodeSegmentCreate)
	if err != nil {
		return segmentCreate{}, err
	}
	return segmentCreate{name: r.Name, members: members(r.Contacts)}, nil
}

// decodeSegmentContacts validates the segment_id path parameter together
// with the body, as FastAPI does (path items first).
func decodeSegmentContacts(segmentID string, body []byte, contentType string) (segmentContacts, error) {
	isJSON := contentType == "" || validation.IsJSONContentType(contentType)
	r, err := validation.DecodeSegmentContacts(segmentID, body, isJSON)
	if err != nil {
		return segmentContacts{}, err
	}
	return segmentContacts{segmentID: r.SegmentID, members: members(r.Contacts)}, nil
}
