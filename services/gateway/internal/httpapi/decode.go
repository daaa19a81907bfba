package httpapi

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

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
	return sends.CampaignSend{CampaignID: r.CampaignID, Contacts: r.Contacts, IsForced: r.IsForced, ScheduledAt: r.ScheduledAt}, nil
}

func decodeAutomationTrigger(body []byte, contentType string) (sends.AutomationTrigger, error) {
	r, err := decodeJSON(body, contentType, validation.DecodeAutomationTrigger)
	if err != nil {
		return sends.AutomationTrigger{}, err
	}
	out := sends.AutomationTrigger{
		AutomationID: r.AutomationID,
		Contacts:     make([]sends.AutomationContact, len(r.Contacts)),
		ImageURL:     r.ImageURL.V, VideoURL: r.VideoURL.V, URL: r.URL.V, URL2: r.URL2.V,
	}
	for i, c := range r.Contacts {
		ac := sends.AutomationContact{Phone: c.Phone, ImageURL: c.ImageURL.V, VideoURL: c.VideoURL.V}
		if c.FirstName.Valid {
			ac.FirstName = &c.FirstName.V
		}
		if c.LastName.Valid {
			ac.LastName = &c.LastName.V
		}
		if c.Variables != nil {
			ac.Variables = c.Variables.Map()
		}
		out.Contacts[i] = ac
	}
	return out, nil
}
