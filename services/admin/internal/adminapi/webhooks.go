package adminapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/webhooks"
)

// maxBodyBytes bounds a webhook request body.
const maxBodyBytes = 64 << 10

// Endpoint is a webhook endpoint as the API shows it: never its secret.
type Endpoint struct {
	ID             string     `json:"id"`
	URL            string     `json:"url"`
	Description    string     `json:"description"`
	EventTypes     []string   `json:"event_types"`
	Enabled        bool       `json:"enabled"`
	DisabledReason string     `json:"disabled_reason"`
	DisabledAt     *time.Time `json:"disabled_at"`
	LastError      string     `json:"last_error"`
	FailingSince   *time.Time `json:"failing_since"`
	SecretHint     string     `json:"secret_hint"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
}

// ToEndpoint is the API form of an endpoint (parleyctl prints the same).
func ToEndpoint(e webhooks.Endpoint) Endpoint {
	return Endpoint{ID: e.ID, URL: e.URL, Description: e.Description, EventTypes: e.EventTypes, Enabled: e.Enabled,
		DisabledReason: e.DisabledReason, DisabledAt: utc(e.DisabledAt), LastError: e.LastError, FailingSince: utc(e.FailingSince),
		SecretHint: e.SecretHint, CreatedAt: e.CreatedAt.UTC(), UpdatedAt: e.UpdatedAt.UTC()}
}

// Attempt is one delivery attempt.
type Attempt struct {
	ID           int64     `json:"id"`
	EventID      string    `json:"event_id"`
	EventType    string    `json:"event_type"`
	Status       string    `json:"status"`
	ResponseCode *int      `json:"response_code"`
	LatencyMS    int       `json:"latency_ms"`
	Excerpt      string    `json:"excerpt"`
	Error        string    `json:"error"`
	AttemptedAt  time.Time `json:"attempted_at"`
}

// ToAttempt is the API form of an attempt.
func ToAttempt(a webhooks.Attempt) Attempt {
	return Attempt{ID: a.ID, EventID: a.EventID, EventType: a.EventType, Status: string(a.Status), ResponseCode: a.ResponseCode,
		LatencyMS: a.LatencyMS, Excerpt: a.Excerpt, Error: a.Error, AttemptedAt: a.AttemptedAt.UTC()}
}

// Delivery is a queued delivery (a test event).
type Delivery struct {
	ID            int64      `json:"id"`
	EventID       string     `json:"event_id"`
	EventType     string     `json:"event_type"`
	Status        string     `json:"status"`
	NextAttemptAt *time.Time `json:"next_attempt_at"`
}

func (a *API) routeWebhooks() {
	base := Prefix + "companies/{id}/webhooks"
	a.mux.HandleFunc(base, methods{http.MethodGet: a.listEndpoints, http.MethodPost: a.createEndpoint}.serve)
	a.mux.HandleFunc(base+"/{eid}", methods{http.MethodGet: a.getEndpoint, http.MethodPatch: a.updateEndpoint, http.MethodDelete: a.deleteEndpoint}.serve)
	a.mux.HandleFunc(base+"/{eid}/rotate-secret", methods{http.MethodPost: a.rotateEndpointSecret}.serve)
	a.mux.HandleFunc(base+"/{eid}/enable", methods{http.MethodPost: a.enableEndpoint}.serve)
	a.mux.HandleFunc(base+"/{eid}/replay", methods{http.MethodPost: a.replayEndpoint}.serve)
	a.mux.HandleFunc(base+"/{eid}/test", methods{http.MethodPost: a.testEndpoint}.serve)
	a.mux.HandleFunc(base+"/{eid}/attempts", methods{http.MethodGet: a.endpointAttempts}.serve)
}

// validationItem is one item of the spec's 422 body.
type validationItem struct {
	Loc  []any  `json:"loc"`
	Msg  string `json:"msg"`
	Type string `json:"type"`
}

func writeValidation(w http.ResponseWriter, items ...validationItem) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": items})
}

func fieldItem(field, msg string) validationItem {
	return validationItem{Loc: []any{"body", field}, Msg: msg, Type: "value_error"}
}

// decode reads a JSON object body strictly into v: 400 for a body that is
// not one, 422 for an unknown field or a wrong type. An empty body is {}.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		writeJSON(w, http.StatusRequestEntityTooLarge, detail(fmt.Sprintf("The body is larger than %d bytes", maxBodyBytes)))
		return false
	}
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil && dec.More():
		writeJSON(w, http.StatusBadRequest, detail("The body must be one JSON object"))
		return false
	case err == nil:
		return true
	case errors.As(err, &typeErr):
		writeValidation(w, fieldItem(typeErr.Field, fmt.Sprintf("%s must be a %s", typeErr.Field, typeErr.Type)))
		return false
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		writeValidation(w, validationItem{Loc: []any{"body", field}, Msg: "unknown field", Type: "extra_forbidden"})
		return false
	default:
		writeJSON(w, http.StatusBadRequest, detail("The body is not valid JSON"))
		return false
	}
}

type endpointInput struct {
	URL         *string   `json:"url"`
	Description *string   `json:"description"`
	EventTypes  *[]string `json:"event_types"`
	Enabled     *bool     `json:"enabled"`
}

func (a *API) endpointID(w http.ResponseWriter, r *http.Request) (int64, string, bool) {
	id, ok := a.companyID(w, r)
	return id, r.PathValue("eid"), ok
}

func (a *API) listEndpoints(w http.ResponseWriter, r *http.Request) {
	id, ok := a.companyID(w, r)
	if !ok {
		return
	}
	eps, err := a.hooks.List(r.Context(), id)
	if err != nil {
		a.failWebhook(w, r, err)
		return
	}
	out := make([]Endpoint, 0, len(eps))
	for _, e := range eps {
		out = append(out, ToEndpoint(e))
	}
	writeJSON(w, http.StatusOK, map[string]any{"endpoints": out, "limit": a.hooks.Config().MaxEndpoints})
}

func (a *API) createEndpoint(w http.ResponseWriter, r *http.Request) {
	id, ok := a.companyID(w, r)
	if !ok {
		return
	}
	var in endpointInput
	if !decode(w, r, &in) {
		return
	}
	if in.URL == nil {
		writeValidation(w, validationItem{Loc: []any{"body", "url"}, Msg: "url is required", Type: "missing"})
		return
	}
	inp := webhooks.Input{URL: *in.URL, Enabled: in.Enabled}
	if in.Description != nil {
		inp.Description = *in.Description
	}
	if in.EventTypes != nil {
		inp.EventTypes = *in.EventTypes
	}
	secret, ep, err := a.hooks.Create(r.Context(), id, inp)
	if err != nil {
		a.failWebhook(w, r, err)
		return
	}
	a.log.Info("webhook endpoint created", zap.Int64("company_id", id), zap.String("endpoint_id", ep.ID), zap.String("actor", actor.Label))
	writeJSON(w, http.StatusCreated, map[string]any{"secret": secret, "endpoint": ToEndpoint(ep)})
}

func (a *API) getEndpoint(w http.ResponseWriter, r *http.Request) {
	id, eid, ok := a.endpointID(w, r)
	if !ok {
		return
	}
	ep, err := a.hooks.Get(r.Context(), id, eid)
	if err != nil {
		a.failWebhook(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"endpoint": ToEndpoint(ep)})
}

func (a *API) updateEndpoint(w http.ResponseWriter, r *http.Request) {
	id, eid, ok := a.endpointID(w, r)
	if !ok {
		return
	}
	var in endpointInput
	if !decode(w, r, &in) {
		return
	}
	ep, err := a.hooks.Update(r.Context(), id, eid, webhooks.Patch{URL: in.URL, Description: in.Description, EventTypes: in.EventTypes, Enabled: in.Enabled})
	if err != nil {
		a.failWebhook(w, r, err)
		return
	}
	a.log.Info("webhook endpoint updated", zap.Int64("company_id", id), zap.String("endpoint_id", ep.ID), zap.String("actor", actor.Label))
	writeJSON(w, http.StatusOK, map[string]any{"endpoint": ToEndpoint(ep)})
}

func (a *API) deleteEndpoint(w http.ResponseWriter, r *http.Request) {
	id, eid, ok := a.endpointID(w, r)
	if !ok {
		return
	}
	if err := a.hooks.Delete(r.Context(), id, eid); err != nil {
		a.failWebhook(w, r, err)
		return
	}
	a.log.Info("webhook endpoint deleted", zap.Int64("company_id", id), zap.String("endpoint_id", eid), zap.String("actor", actor.Label))
	writeJSON(w, http.StatusOK, map[string]any{"deleted": eid})
}

func (a *API) rotateEndpointSecret(w http.ResponseWriter, r *http.Request) {
	id, eid, ok := a.endpointID(w, r)
	if !ok {
		return
	}
	secret, ep, err := a.hooks.RotateSecret(r.Context(), id, eid)
	if err != nil {
		a.failWebhook(w, r, err)
		return
	}
	a.log.Info("webhook secret rotated", zap.Int64("company_id", id), zap.String("endpoint_id", eid), zap.String("actor", actor.Label))
	writeJSON(w, http.StatusCreated, map[string]any{"secret": secret, "endpoint": ToEndpoint(ep),
		"previous_expires_at": a.hooks.Now().UTC().Add(webhooks.RotationOverlap)})
}

func (a *API) enableEndpoint(w http.ResponseWriter, r *http.Request) {
	id, eid, ok := a.endpointID(w, r)
	if !ok {
		return
	}
	ep, err := a.hooks.Enable(r.Context(), id, eid)
	if err != nil {
		a.failWebhook(w, r, err)
		return
	}
	a.log.Info("webhook endpoint enabled", zap.Int64("company_id", id), zap.String("endpoint_id", eid), zap.String("actor", actor.Label))
	writeJSON(w, http.StatusOK, map[string]any{"endpoint": ToEndpoint(ep)})
}

func (a *API) replayEndpoint(w http.ResponseWriter, r *http.Request) {
	id, eid, ok := a.endpointID(w, r)
	if !ok {
		return
	}
	var in struct {
		From *string `json:"from"`
		To   *string `json:"to"`
	}
	if !decode(w, r, &in) {
		return
	}
	var items []validationItem
	var from, to time.Time
	for _, f := range []struct {
		name string
		v    *string
		dst  *time.Time
	}{{"from", in.From, &from}, {"to", in.To, &to}} {
		if f.v == nil {
			items = append(items, validationItem{Loc: []any{"body", f.name}, Msg: f.name + " is required (RFC 3339)", Type: "missing"})
			continue
		}
		t, err := time.Parse(time.RFC3339, *f.v)
		if err != nil {
			items = append(items, fieldItem(f.name, f.name+" must be an RFC 3339 time, e.g. 2026-11-24T10:00:00Z"))
			continue
		}
		*f.dst = t
	}
	if len(items) > 0 {
		writeValidation(w, items...)
		return
	}
	n, err := a.hooks.ReplayFailed(r.Context(), id, eid, from, to)
	if err != nil {
		a.failWebhook(w, r, err)
		return
	}
	a.log.Info("webhook deliveries replayed", zap.Int64("company_id", id), zap.String("endpoint_id", eid), zap.Int64("queued", n), zap.String("actor", actor.Label))
	writeJSON(w, http.StatusAccepted, map[string]any{"queued": n})
}

func (a *API) testEndpoint(w http.ResponseWriter, r *http.Request) {
	id, eid, ok := a.endpointID(w, r)
	if !ok {
		return
	}
	var in struct {
		EventType string `json:"event_type"`
	}
	if !decode(w, r, &in) {
		return
	}
	d, err := a.hooks.SendTest(r.Context(), id, eid, in.EventType)
	if err != nil {
		a.failWebhook(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"delivery": Delivery{ID: d.ID, EventID: d.EventID, EventType: d.EventType,
		Status: string(d.Status), NextAttemptAt: utc(d.NextAttemptAt)}})
}

func (a *API) endpointAttempts(w http.ResponseWriter, r *http.Request) {
	id, eid, ok := a.endpointID(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	limit := 50
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			writeJSON(w, http.StatusBadRequest, detail("limit must be an integer from 1 to 1000"))
			return
		}
		limit = n
	}
	var cursor int64
	if s := q.Get("cursor"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			writeJSON(w, http.StatusBadRequest, detail("cursor must be the next_cursor of a previous page"))
			return
		}
		cursor = n
	}
	atts, next, err := a.hooks.Attempts(r.Context(), id, eid, cursor, limit)
	if err != nil {
		a.failWebhook(w, r, err)
		return
	}
	out := make([]Attempt, 0, len(atts))
	for _, at := range atts {
		out = append(out, ToAttempt(at))
	}
	var nextCursor any
	if next != 0 {
		nextCursor = strconv.FormatInt(next, 10)
	}
	writeJSON(w, http.StatusOK, map[string]any{"attempts": out, "next_cursor": nextCursor})
}

// failWebhook turns the webhook store's errors into statuses.
func (a *API) failWebhook(w http.ResponseWriter, r *http.Request, err error) {
	var ve *webhooks.ValidationError
	switch {
	case errors.As(err, &ve):
		items := make([]validationItem, 0, len(ve.Fields))
		for _, f := range ve.Fields {
			items = append(items, fieldItem(f.Field, f.Msg))
		}
		writeValidation(w, items...)
	case errors.Is(err, webhooks.ErrCompanyNotFound):
		writeJSON(w, http.StatusNotFound, detail("Company not found"))
	case errors.Is(err, webhooks.ErrNotFound):
		writeJSON(w, http.StatusNotFound, detail("Webhook endpoint not found"))
	case errors.Is(err, webhooks.ErrTooManyEndpoints):
		writeJSON(w, http.StatusConflict, detail(fmt.Sprintf("The company already has the maximum of %d webhook endpoints", a.hooks.Config().MaxEndpoints)))
	case errors.Is(err, webhooks.ErrDisabled):
		writeJSON(w, http.StatusConflict, detail("The webhook endpoint is disabled; enable it first"))
	default:
		a.fail(w, r, err)
	}
}
