package whatsapp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Template management through the Graph API (Meta, "Message Templates
// API"): a template belongs to a WhatsApp Business Account, and the token
// of any of its numbers manages it.

// templatePage is how many templates one list call asks for.
const templatePage = 100

// maxTemplatePages bounds a listing, so that a provider whose paging never
// ends cannot keep a caller forever (100,000 templates; Meta allows a WABA
// far fewer).
const maxTemplatePages = 1000

// CreateTemplate submits a template definition to the WhatsApp Business
// Account wabaID with acct's token (POST /{version}/{waba_id}/message_templates)
// and returns the provider's id, status (PENDING, or already APPROVED or
// REJECTED) and category. A refusal is an *Error with the provider's code
// and message, as for a send.
func (c *Client) CreateTemplate(ctx context.Context, acct Account, wabaID string, d TemplateDefinition) (TemplateCreated, error) {
	if err := checkWABA(acct, wabaID); err != nil {
		return TemplateCreated{}, err
	}
	body, err := json.Marshal(d)
	if err != nil {
		return TemplateCreated{}, fmt.Errorf("whatsapp: encode template: %w", err)
	}
	status, raw, err := c.do(ctx, http.MethodPost, c.templatesURL(wabaID), acct.AccessToken, body)
	if err != nil {
		return TemplateCreated{}, err
	}
	var out TemplateCreated
	if err := json.Unmarshal(raw, &out); err != nil || out.ID == "" || out.Status == "" {
		return TemplateCreated{}, &Error{HTTPStatus: status, Class: Retryable, Message: "template created without an id or a status"}
	}
	return out, nil
}

// ListTemplates returns every template of the WhatsApp Business Account
// wabaID (GET /{version}/{waba_id}/message_templates), following
// paging.next to the last page. A next page on another host than the
// client's base URL is not followed (the token goes nowhere else): that is
// an error.
func (c *Client) ListTemplates(ctx context.Context, acct Account, wabaID string) ([]MessageTemplate, error) {
	if err := checkWABA(acct, wabaID); err != nil {
		return nil, err
	}
	next := c.templatesURL(wabaID) + "?limit=" + fmt.Sprint(templatePage)
	var out []MessageTemplate
	for page := 0; next != ""; page++ {
		if page == maxTemplatePages {
			return nil, fmt.Errorf("whatsapp: templates of %s: more than %d pages", wabaID, maxTemplatePages)
		}
		if !strings.HasPrefix(next, c.base+"/") {
			return nil, fmt.Errorf("whatsapp: templates of %s: next page %q is not under %s", wabaID, next, c.base)
		}
		_, raw, err := c.do(ctx, http.MethodGet, next, acct.AccessToken, nil)
		if err != nil {
			return nil, err
		}
		var list TemplateList
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, &Error{Class: Retryable, Message: "template list that cannot be read: " + clip(err.Error(), 200)}
		}
		out = append(out, list.Data...)
		next = ""
		if list.Paging != nil && len(list.Data) > 0 {
			next = list.Paging.Next
		}
	}
	return out, nil
}

func (c *Client) templatesURL(wabaID string) string {
	return c.base + "/" + c.version + "/" + url.PathEscape(wabaID) + "/message_templates"
}

// checkWABA refuses a call without a WABA id or a token, as a send without
// an account: nothing is asked of the provider.
func checkWABA(acct Account, wabaID string) error {
	if wabaID == "" || acct.AccessToken == "" {
		return &Error{Class: RetryLater, RetryAfter: AccountFloor, Message: "account has no WhatsApp Business Account id or access token"}
	}
	return nil
}
