// Package adminapi is the operators' JSON API for companies' API keys and
// webhook endpoints, for automation: list, create, rotate, revoke, and the audit trail. It is served
// by the admin service only, never on the public gateway, and authenticated
// with one operator bearer token (PARLEY_ADMIN_TOKEN). Without a token
// configured every route answers 503: an operator who forgot it learns why,
// and nothing is reachable without a credential.
//
// Routes (all JSON; errors are {"detail": "..."}):
//
//	GET  /admin/api/companies/{id}/keys                 200 {"keys": [Key...]}
//	POST /admin/api/companies/{id}/keys                 201 {"api_key": "<full key, shown once>", "key": Key}
//	POST /admin/api/companies/{id}/keys/rotate          201 {"api_key": "...", "key": Key, "previous": Key}
//	POST /admin/api/companies/{id}/keys/{key_id}/revoke 200 {"key": Key}
//	GET  /admin/api/companies/{id}/keys/events?limit=50 200 {"events": [Event...]}
//
// and the company's webhook endpoints (pkg/webhooks; 422 bodies are the
// spec's {"detail": [{"loc", "msg", "type"}]}):
//
//	GET    /admin/api/companies/{id}/webhooks                    200 {"endpoints": [Endpoint...], "limit": n}
//	POST   /admin/api/companies/{id}/webhooks                    201 {"secret": "whsec_... (shown once)", "endpoint": Endpoint}
//	GET    /admin/api/companies/{id}/webhooks/{eid}              200 {"endpoint": Endpoint}
//	PATCH  /admin/api/companies/{id}/webhooks/{eid}              200 {"endpoint": Endpoint}
//	DELETE /admin/api/companies/{id}/webhooks/{eid}              200 {"deleted": eid}
//	POST   /admin/api/companies/{id}/webhooks/{eid}/rotate-secret 201 {"secret": "...", "endpoint": Endpoint, "previous_expires_at": t}
//	POST   /admin/api/companies/{id}/webhooks/{eid}/enable       200 {"endpoint": Endpoint}
//	POST   /admin/api/companies/{id}/webhooks/{eid}/replay       202 {"queued": n}       body {"from", "to"} (RFC 3339)
//	POST   /admin/api/companies/{id}/webhooks/{eid}/test         202 {"delivery": {...}} body {"event_type"} (optional)
//	GET    /admin/api/companies/{id}/webhooks/{eid}/attempts?cursor=&limit=50 200 {"attempts": [...], "next_cursor": "..."|null}
//
// and, with WithAddressBook, a company's opt-out words and a contact's
// opt-out history (optout.go); with WithTemplates, its templates (created
// through the provider), its numbers' quality and its portfolios' messaging
// limit tiers (templates.go).
package adminapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/apikey"
	"github.com/parleyhq/parley/pkg/webhooks"
	"github.com/parleyhq/parley/services/admin/internal/credentials"
)

// Prefix is where the API is mounted.
const Prefix = "/admin/api/"

// actor labels the audit trail entries of API calls.
var actor = apikey.Actor{Label: "admin-api"}

// API serves the admin JSON API.
type API struct {
	tokenHash [sha256.Size]byte
	enabled   bool
	creds     *credentials.Service
	hooks     *webhooks.Store
	book      AddressBook
	templates Templates
	exists    CompanyExists
	log       *zap.Logger
	mux       *http.ServeMux
}

// New returns the API; an empty token disables it.
func New(token string, creds *credentials.Service, hooks *webhooks.Store, log *zap.Logger) *API {
	a := &API{tokenHash: sha256.Sum256([]byte(token)), enabled: token != "", creds: creds, hooks: hooks, log: log, mux: http.NewServeMux()}
	a.routeWebhooks()
	a.mux.HandleFunc(Prefix+"companies/{id}/keys", methods{http.MethodGet: a.list, http.MethodPost: a.create}.serve)
	a.mux.HandleFunc(Prefix+"companies/{id}/keys/rotate", methods{http.MethodPost: a.rotate}.serve)
	a.mux.HandleFunc(Prefix+"companies/{id}/keys/events", methods{http.MethodGet: a.events}.serve)
	a.mux.HandleFunc(Prefix+"companies/{id}/keys/{keyID}/revoke", methods{http.MethodPost: a.revoke}.serve)
	a.mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, detail("Not found"))
	})
	return a
}

// ServeHTTP checks the operator token, then routes.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !a.enabled {
		writeJSON(w, http.StatusServiceUnavailable, detail("The admin API is disabled: set PARLEY_ADMIN_TOKEN to enable it"))
		return
	}
	if !a.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="parley-admin"`)
		writeJSON(w, http.StatusUnauthorized, detail("Invalid admin token"))
		return
	}
	a.mux.ServeHTTP(w, r)
}

// authorized compares hashes of the presented and configured tokens in
// constant time, so neither the content nor the length of the token leaks.
func (a *API) authorized(r *http.Request) bool {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(got[:], a.tokenHash[:]) == 1
}

type methods map[string]http.HandlerFunc

func (m methods) serve(w http.ResponseWriter, r *http.Request) {
	h, ok := m[r.Method]
	if !ok {
		allow := make([]string, 0, len(m))
		for k := range m {
			allow = append(allow, k)
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeJSON(w, http.StatusMethodNotAllowed, detail("Method not allowed"))
		return
	}
	h(w, r)
}

// Key is a stored key as the API shows it: never its secret.
type Key struct {
	KeyID       string     `json:"key_id"`
	Masked      string     `json:"masked"`
	State       string     `json:"state"`
	CreatedAt   time.Time  `json:"created_at"`
	LastUsedAt  *time.Time `json:"last_used_at"`
	RotatedAt   *time.Time `json:"rotated_at"`
	GraceEndsAt *time.Time `json:"grace_ends_at"`
	RevokedAt   *time.Time `json:"revoked_at"`
}

// Event is one audit trail entry.
type Event struct {
	KeyID       string    `json:"key_id"`
	Action      string    `json:"action"`
	Actor       string    `json:"actor"`
	ActorUserID *int64    `json:"actor_user_id"`
	CreatedAt   time.Time `json:"created_at"`
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func toKey(k apikey.Key) Key {
	return Key{KeyID: k.KeyID, Masked: k.Masked(), State: string(k.State), CreatedAt: k.CreatedAt.UTC(),
		LastUsedAt: utc(k.LastUsedAt), RotatedAt: utc(k.RotatedAt), GraceEndsAt: utc(k.GraceEndsAt), RevokedAt: utc(k.RevokedAt)}
}

func (a *API) companyID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		writeJSON(w, http.StatusNotFound, detail("Company not found"))
		return 0, false
	}
	return id, true
}

func (a *API) list(w http.ResponseWriter, r *http.Request) {
	id, ok := a.companyID(w, r)
	if !ok {
		return
	}
	keys, err := a.creds.Keys(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := make([]Key, 0, len(keys))
	for _, k := range keys {
		out = append(out, toKey(k))
	}
	writeJSON(w, http.StatusOK, map[string]any{"keys": out})
}

func (a *API) events(w http.ResponseWriter, r *http.Request) {
	id, ok := a.companyID(w, r)
	if !ok {
		return
	}
	limit := 50
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			writeJSON(w, http.StatusBadRequest, detail("limit must be an integer from 1 to 1000"))
			return
		}
		limit = n
	}
	evs, err := a.creds.Events(r.Context(), id, limit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := make([]Event, 0, len(evs))
	for _, e := range evs {
		out = append(out, Event{KeyID: e.KeyID, Action: e.Action, Actor: e.Actor, ActorUserID: e.ActorUserID, CreatedAt: e.CreatedAt.UTC()})
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": out})
}

func (a *API) create(w http.ResponseWriter, r *http.Request) {
	id, ok := a.companyID(w, r)
	if !ok {
		return
	}
	full, key, err := a.creds.Create(r.Context(), id, actor)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.log.Info("API key created", zap.Int64("company_id", id), zap.String("key_id", key.KeyID), zap.String("actor", actor.Label))
	writeJSON(w, http.StatusCreated, map[string]any{"api_key": full, "key": toKey(key)})
}

func (a *API) rotate(w http.ResponseWriter, r *http.Request) {
	id, ok := a.companyID(w, r)
	if !ok {
		return
	}
	full, created, previous, err := a.creds.Rotate(r.Context(), id, "", actor)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.log.Info("API key rotated", zap.Int64("company_id", id), zap.String("key_id", created.KeyID),
		zap.String("previous_key_id", previous.KeyID), zap.String("actor", actor.Label))
	writeJSON(w, http.StatusCreated, map[string]any{"api_key": full, "key": toKey(created), "previous": toKey(previous)})
}

func (a *API) revoke(w http.ResponseWriter, r *http.Request) {
	id, ok := a.companyID(w, r)
	if !ok {
		return
	}
	key, err := a.creds.Revoke(r.Context(), id, r.PathValue("keyID"), actor)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.log.Info("API key revoked", zap.Int64("company_id", id), zap.String("key_id", key.KeyID), zap.String("actor", actor.Label))
	writeJSON(w, http.StatusOK, map[string]any{"key": toKey(key)})
}

// fail turns domain errors into statuses; anything else is a 500 that says
// nothing about its cause.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, credentials.ErrCompanyNotFound):
		writeJSON(w, http.StatusNotFound, detail("Company not found"))
	case errors.Is(err, apikey.ErrNotFound):
		writeJSON(w, http.StatusNotFound, detail("API key not found"))
	case errors.Is(err, apikey.ErrActiveKeyExists):
		writeJSON(w, http.StatusConflict, detail("The company already has an active API key; rotate or revoke it"))
	case errors.Is(err, apikey.ErrNoActiveKey):
		writeJSON(w, http.StatusConflict, detail("The company has no active API key to rotate; create one"))
	case errors.Is(err, apikey.ErrAlreadyRevoked):
		writeJSON(w, http.StatusConflict, detail("The API key is already revoked"))
	default:
		a.log.Error("admin API request failed", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
		writeJSON(w, http.StatusInternalServerError, detail("Internal server error"))
	}
}

type errorBody struct {
	Detail string `json:"detail"`
}

func detail(msg string) errorBody { return errorBody{Detail: msg} }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	// Some answers carry a full key: no cache may keep any of them.
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
