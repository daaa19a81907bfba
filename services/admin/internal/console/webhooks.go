package console

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/events"
	"github.com/parleyhq/parley/pkg/webhooks"
)

// PathWebhooks is the Webhooks page, beside Credentials.
const PathWebhooks = "/settings/integrations/webhooks"

// attemptsPerPage is how many attempts an endpoint's page lists at once.
const attemptsPerPage = 25

func (c *Console) routeWebhooks(mux *http.ServeMux) {
	mux.Handle("GET "+PathWebhooks, c.requireUser(c.webhooksPage))
	mux.Handle("POST "+PathWebhooks+"/create", c.requireAdminFor(hooksReserved, c.createEndpoint))
	mux.Handle("GET "+PathWebhooks+"/{id}", c.requireUser(c.endpointPage))
	mux.Handle("POST "+PathWebhooks+"/{id}/update", c.requireAdminFor(hooksReserved, c.updateEndpoint))
	mux.Handle("POST "+PathWebhooks+"/{id}/rotate", c.requireAdminFor(hooksReserved, c.rotateEndpoint))
	mux.Handle("POST "+PathWebhooks+"/{id}/enable", c.requireAdminFor(hooksReserved, c.enableEndpoint))
	mux.Handle("POST "+PathWebhooks+"/{id}/replay", c.requireAdminFor(hooksReserved, c.replayEndpoint))
	mux.Handle("POST "+PathWebhooks+"/{id}/test", c.requireAdminFor(hooksReserved, c.testEndpoint))
	mux.Handle("GET "+PathWebhooks+"/{id}/delete", c.requireAdminFor(hooksReserved, c.deleteEndpointConfirm))
	mux.Handle("POST "+PathWebhooks+"/{id}/delete", c.requireAdminFor(hooksReserved, c.deleteEndpoint))
}

// endpointForm is the create and edit form: what was typed, and what was
// wrong with it.
type endpointForm struct {
	URL         string
	Description string
	EventTypes  []string
	Enabled     bool
	Errors      map[string]string
}

func (f endpointForm) Has(t string) bool { return slices.Contains(f.EventTypes, t) }

// webhooksView is the Webhooks page.
type webhooksView struct {
	Endpoints []webhooks.Endpoint
	Limit     int
	CanManage bool
	Form      endpointForm
	// NewSecret is set only in the response to the create that made it.
	NewSecret *newSecretView
}

func (v webhooksView) AtLimit() bool { return len(v.Endpoints) >= v.Limit }

type newSecretView struct {
	Secret   string
	Endpoint webhooks.Endpoint
	Rotated  bool
	Until    time.Time
}

// endpointView is one endpoint's page.
type endpointView struct {
	Endpoint   webhooks.Endpoint
	CanManage  bool
	Form       endpointForm
	NewSecret  *newSecretView
	Attempts   []webhooks.Attempt
	NextCursor int64
	// Replay and test form state.
	ReplayFrom, ReplayTo string
	ReplayError          string
	TestType             string
	TestError            string
	EventTypes           []events.Type
	TestTypes            []string
}

func (c *Console) webhooksPage(w http.ResponseWriter, r *http.Request) {
	c.renderWebhooks(w, r, http.StatusOK, endpointForm{Enabled: true}, nil)
}

func (c *Console) renderWebhooks(w http.ResponseWriter, r *http.Request, status int, form endpointForm, secret *newSecretView) {
	u := currentUser(r.Context())
	eps, err := c.Webhooks.List(r.Context(), u.CompanyID)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	c.renderPage(w, r, status, c.pages.webhooks, "Webhooks", "webhooks",
		webhooksView{Endpoints: eps, Limit: c.Webhooks.Config().MaxEndpoints, CanManage: u.IsAdmin(), Form: form, NewSecret: secret})
}

// readForm parses a posted form, answering 400 when it cannot.
func (c *Console) readForm(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		c.renderError(w, r, http.StatusBadRequest, "The form could not be read", "Please go back and try again.")
		return false
	}
	return true
}

func formOf(r *http.Request) endpointForm {
	f := endpointForm{URL: r.PostForm.Get("url"), Description: r.PostForm.Get("description"),
		Enabled: r.PostForm.Get("enabled") == "on", EventTypes: []string{}}
	for _, t := range r.PostForm["event_types"] {
		if t != "" {
			f.EventTypes = append(f.EventTypes, t)
		}
	}
	return f
}

// fieldErrors maps a validation error to the form's fields; ok is false for
// any other error.
func fieldErrors(err error) (map[string]string, bool) {
	var ve *webhooks.ValidationError
	if !errors.As(err, &ve) {
		return nil, false
	}
	m := map[string]string{}
	for _, f := range ve.Fields {
		if m[f.Field] == "" {
			m[f.Field] = f.Msg
		}
	}
	return m, true
}

func (c *Console) createEndpoint(w http.ResponseWriter, r *http.Request) {
	if !c.readForm(w, r) {
		return
	}
	u := currentUser(r.Context())
	form := formOf(r)
	enabled := form.Enabled
	secret, ep, err := c.Webhooks.Create(r.Context(), u.CompanyID, webhooks.Input{URL: form.URL, Description: form.Description,
		EventTypes: form.EventTypes, Enabled: &enabled})
	if m, ok := fieldErrors(err); ok {
		form.Errors = m
		c.renderWebhooks(w, r, http.StatusUnprocessableEntity, form, nil)
		return
	}
	if errors.Is(err, webhooks.ErrTooManyEndpoints) {
		form.Errors = map[string]string{"form": fmt.Sprintf("Your company already has the maximum of %d endpoints. Delete one to add another.", c.Webhooks.Config().MaxEndpoints)}
		c.renderWebhooks(w, r, http.StatusConflict, form, nil)
		return
	}
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	c.Log.Info("webhook endpoint created", zap.Int64("company_id", u.CompanyID), zap.Int64("user_id", u.ID), zap.String("endpoint_id", ep.ID))
	c.renderWebhooks(w, r, http.StatusOK, endpointForm{Enabled: true}, &newSecretView{Secret: secret, Endpoint: ep})
}

// loadEndpoint finds the company's endpoint of the path, or answers 404.
func (c *Console) loadEndpoint(w http.ResponseWriter, r *http.Request) (webhooks.Endpoint, bool) {
	ep, err := c.Webhooks.Get(r.Context(), currentUser(r.Context()).CompanyID, r.PathValue("id"))
	if errors.Is(err, webhooks.ErrNotFound) {
		c.renderError(w, r, http.StatusNotFound, "Endpoint not found", "Your company has no webhook endpoint with this id.")
		return webhooks.Endpoint{}, false
	}
	if err != nil {
		c.serverError(w, r, err)
		return webhooks.Endpoint{}, false
	}
	return ep, true
}

// postedEndpoint reads a posted form and finds the endpoint of the path,
// answering 400 or 404 when it cannot.
func (c *Console) postedEndpoint(w http.ResponseWriter, r *http.Request) (webhooks.Endpoint, bool) {
	if !c.readForm(w, r) {
		return webhooks.Endpoint{}, false
	}
	return c.loadEndpoint(w, r)
}

func (c *Console) endpointPage(w http.ResponseWriter, r *http.Request) {
	ep, ok := c.loadEndpoint(w, r)
	if !ok {
		return
	}
	var cursor int64
	if s := r.URL.Query().Get("cursor"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			c.renderError(w, r, http.StatusBadRequest, "Bad page", "This page of attempts does not exist. Go back to the endpoint.")
			return
		}
		cursor = n
	}
	c.renderEndpoint(w, r, http.StatusOK, ep, endpointView{Form: formFrom(ep)}, cursor)
}

func formFrom(ep webhooks.Endpoint) endpointForm {
	return endpointForm{URL: ep.URL, Description: ep.Description, EventTypes: ep.EventTypes, Enabled: ep.Enabled}
}

func (c *Console) renderEndpoint(w http.ResponseWriter, r *http.Request, status int, ep webhooks.Endpoint, v endpointView, cursor int64) {
	u := currentUser(r.Context())
	var err error
	v.Attempts, v.NextCursor, err = c.Webhooks.Attempts(r.Context(), u.CompanyID, ep.ID, cursor, attemptsPerPage)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	v.Endpoint, v.CanManage, v.EventTypes = ep, u.IsAdmin(), events.Types
	v.TestTypes = []string{webhooks.TestEventType}
	for _, t := range events.Types {
		v.TestTypes = append(v.TestTypes, string(t))
	}
	now := c.Webhooks.Now().UTC()
	if v.ReplayFrom == "" && v.ReplayTo == "" {
		v.ReplayFrom = now.Add(-24 * time.Hour).Format(localLayout)
		v.ReplayTo = now.Add(time.Minute).Format(localLayout)
	}
	c.renderPage(w, r, status, c.pages.webhook, "Webhook endpoint", "webhooks", v)
}

// localLayout is the value of an <input type="datetime-local">, read as UTC.
const localLayout = "2006-01-02T15:04"

func (c *Console) updateEndpoint(w http.ResponseWriter, r *http.Request) {
	ep, ok := c.postedEndpoint(w, r)
	if !ok {
		return
	}
	u := currentUser(r.Context())
	form := formOf(r)
	types := form.EventTypes
	updated, err := c.Webhooks.Update(r.Context(), u.CompanyID, ep.ID, webhooks.Patch{URL: &form.URL, Description: &form.Description,
		EventTypes: &types, Enabled: &form.Enabled})
	if m, ok := fieldErrors(err); ok {
		form.Errors = m
		c.renderEndpoint(w, r, http.StatusUnprocessableEntity, ep, endpointView{Form: form}, 0)
		return
	}
	if err != nil {
		c.failEndpoint(w, r, err)
		return
	}
	c.Log.Info("webhook endpoint updated", zap.Int64("company_id", u.CompanyID), zap.Int64("user_id", u.ID), zap.String("endpoint_id", updated.ID))
	c.flash(r, true, "The endpoint was saved.")
	http.Redirect(w, r, PathWebhooks+"/"+updated.ID, http.StatusSeeOther)
}

func (c *Console) failEndpoint(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, webhooks.ErrNotFound) {
		c.renderError(w, r, http.StatusNotFound, "Endpoint not found", "Your company has no webhook endpoint with this id.")
		return
	}
	c.serverError(w, r, err)
}

func (c *Console) rotateEndpoint(w http.ResponseWriter, r *http.Request) {
	u := currentUser(r.Context())
	secret, ep, err := c.Webhooks.RotateSecret(r.Context(), u.CompanyID, r.PathValue("id"))
	if err != nil {
		c.failEndpoint(w, r, err)
		return
	}
	c.Log.Info("webhook secret rotated", zap.Int64("company_id", u.CompanyID), zap.Int64("user_id", u.ID), zap.String("endpoint_id", ep.ID))
	c.renderEndpoint(w, r, http.StatusOK, ep, endpointView{Form: formFrom(ep),
		NewSecret: &newSecretView{Secret: secret, Endpoint: ep, Rotated: true, Until: c.Webhooks.Now().UTC().Add(webhooks.RotationOverlap)}}, 0)
}

func (c *Console) enableEndpoint(w http.ResponseWriter, r *http.Request) {
	u := currentUser(r.Context())
	ep, err := c.Webhooks.Enable(r.Context(), u.CompanyID, r.PathValue("id"))
	if err != nil {
		c.failEndpoint(w, r, err)
		return
	}
	c.Log.Info("webhook endpoint enabled", zap.Int64("company_id", u.CompanyID), zap.Int64("user_id", u.ID), zap.String("endpoint_id", ep.ID))
	c.flash(r, true, "The endpoint is enabled again. Deliveries that failed while it was off can be sent again with Replay.")
	http.Redirect(w, r, PathWebhooks+"/"+ep.ID, http.StatusSeeOther)
}

func (c *Console) replayEndpoint(w http.ResponseWriter, r *http.Request) {
	ep, ok := c.postedEndpoint(w, r)
	if !ok {
		return
	}
	u := currentUser(r.Context())
	v := endpointView{Form: formFrom(ep), ReplayFrom: r.PostForm.Get("from"), ReplayTo: r.PostForm.Get("to")}
	from, errFrom := time.Parse(localLayout, v.ReplayFrom)
	to, errTo := time.Parse(localLayout, v.ReplayTo)
	var n int64
	var err error
	switch {
	case errFrom != nil || errTo != nil:
		v.ReplayError = "Give both times as date and time (UTC)."
	case !from.Before(to):
		v.ReplayError = "The end of the range must be after its start."
	default:
		n, err = c.Webhooks.ReplayFailed(r.Context(), u.CompanyID, ep.ID, from, to)
		if err != nil {
			c.failEndpoint(w, r, err)
			return
		}
	}
	if v.ReplayError != "" {
		c.renderEndpoint(w, r, http.StatusUnprocessableEntity, ep, v, 0)
		return
	}
	c.Log.Info("webhook deliveries replayed", zap.Int64("company_id", u.CompanyID), zap.Int64("user_id", u.ID), zap.String("endpoint_id", ep.ID), zap.Int64("queued", n))
	c.flash(r, true, fmt.Sprintf("%d failed %s queued to be sent again.", n, plural(n, "delivery was", "deliveries were")))
	http.Redirect(w, r, PathWebhooks+"/"+ep.ID, http.StatusSeeOther)
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func (c *Console) testEndpoint(w http.ResponseWriter, r *http.Request) {
	ep, ok := c.postedEndpoint(w, r)
	if !ok {
		return
	}
	u := currentUser(r.Context())
	t := r.PostForm.Get("event_type")
	d, err := c.Webhooks.SendTest(r.Context(), u.CompanyID, ep.ID, t)
	if _, bad := fieldErrors(err); bad || errors.Is(err, webhooks.ErrDisabled) {
		msg := "Choose one of the listed event types."
		status := http.StatusUnprocessableEntity
		if errors.Is(err, webhooks.ErrDisabled) {
			msg, status = "The endpoint is disabled: enable it to send a test event.", http.StatusConflict
		}
		c.renderEndpoint(w, r, status, ep, endpointView{Form: formFrom(ep), TestType: t, TestError: msg}, 0)
		return
	}
	if err != nil {
		c.failEndpoint(w, r, err)
		return
	}
	c.flash(r, true, "A "+d.EventType+" test event was queued (id "+d.EventID+"). Its attempts appear below once it is sent.")
	http.Redirect(w, r, PathWebhooks+"/"+ep.ID, http.StatusSeeOther)
}

func (c *Console) deleteEndpointConfirm(w http.ResponseWriter, r *http.Request) {
	ep, ok := c.loadEndpoint(w, r)
	if !ok {
		return
	}
	c.renderPage(w, r, http.StatusOK, c.pages.webhookDelete, "Delete webhook endpoint", "webhooks", ep)
}

func (c *Console) deleteEndpoint(w http.ResponseWriter, r *http.Request) {
	if !c.readForm(w, r) {
		return
	}
	id := r.PathValue("id")
	if r.PostForm.Get("confirm") != "yes" {
		http.Redirect(w, r, PathWebhooks+"/"+id+"/delete", http.StatusSeeOther)
		return
	}
	u := currentUser(r.Context())
	ep, ok := c.loadEndpoint(w, r)
	if !ok {
		return
	}
	if err := c.Webhooks.Delete(r.Context(), u.CompanyID, id); err != nil {
		c.failEndpoint(w, r, err)
		return
	}
	c.Log.Info("webhook endpoint deleted", zap.Int64("company_id", u.CompanyID), zap.Int64("user_id", u.ID), zap.String("endpoint_id", id))
	c.flash(r, true, "The endpoint "+ep.URL+" was deleted. It receives no more events.")
	http.Redirect(w, r, PathWebhooks, http.StatusSeeOther)
}

// statusClass is the pill of an attempt's outcome.
func deliveryClass(s webhooks.Status) string {
	if s == webhooks.StatusSucceeded {
		return "pill-ok"
	}
	return "pill-bad"
}

func typesText(types []string) string {
	if len(types) == 0 {
		return "All events"
	}
	return strings.Join(types, ", ")
}

// formView is the endpoint form with the event types it offers.
type formView struct {
	endpointForm
	EventTypeNames []string
}

func newFormView(f endpointForm) formView {
	names := make([]string, len(events.Types))
	for i, t := range events.Types {
		names[i] = string(t)
	}
	return formView{endpointForm: f, EventTypeNames: names}
}

// FormView is the create form.
func (v webhooksView) FormView() formView { return newFormView(v.Form) }

// FormView is the edit form.
func (v endpointView) FormView() formView { return newFormView(v.Form) }
