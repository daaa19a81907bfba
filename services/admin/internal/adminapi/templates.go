package adminapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/waba"
)

// The templates' and numbers' routes (mounted by WithTemplates):
//
//	GET  /admin/api/companies/{id}/templates             200 {"templates": [Template...]}
//	POST /admin/api/companies/{id}/templates             201 {"template": Template}: submitted to the provider, PENDING
//	GET  /admin/api/companies/{id}/templates/{tid}       200 {"template": Template} with its history
//	GET  /admin/api/companies/{id}/numbers               200 {"numbers": [Number...]}: quality, WABA, portfolio and tier
//	GET  /admin/api/companies/{id}/portfolios            200 {"portfolios": [Portfolio...]}
//	PUT  /admin/api/companies/{id}/portfolios/{pid}      200 {"portfolio": Portfolio}; body {"tier": "TIER_2K"} (the operator's word)

// Templates is what the templates' routes use.
type Templates struct {
	// Catalog reads (and, for a submission, writes) templates and numbers.
	Catalog *catalog.Store
	// Submit creates a template through the provider (waba.Submit).
	Submit func(ctx context.Context, n waba.NewTemplate) (catalog.Template, error)
}

// WithTemplates mounts the templates', numbers' and portfolios' routes.
func (a *API) WithTemplates(t Templates, exists CompanyExists) *API {
	a.templates, a.exists = t, exists
	a.mux.HandleFunc(Prefix+"companies/{id}/templates", methods{http.MethodGet: a.listTemplates, http.MethodPost: a.createTemplate}.serve)
	a.mux.HandleFunc(Prefix+"companies/{id}/templates/{tid}", methods{http.MethodGet: a.getTemplate}.serve)
	a.mux.HandleFunc(Prefix+"companies/{id}/numbers", methods{http.MethodGet: a.listNumbers}.serve)
	a.mux.HandleFunc(Prefix+"companies/{id}/portfolios", methods{http.MethodGet: a.listPortfolios}.serve)
	a.mux.HandleFunc(Prefix+"companies/{id}/portfolios/{pid}", methods{http.MethodPut: a.putPortfolio}.serve)
	return a
}

// NumberRef names a template's number.
type NumberRef struct {
	ID            int64  `json:"id"`
	Name          string `json:"name"`
	PhoneNumberID string `json:"phone_number_id"`
}

// Template is a template as the API shows it: its provider lifecycle, its
// number, how Parley fills it, and (one template's read) its history.
type Template struct {
	ID                 int64                   `json:"id"`
	Name               string                  `json:"name"`
	Language           string                  `json:"language"`
	Category           string                  `json:"category"`
	Status             string                  `json:"status"`
	StatusReason       string                  `json:"status_reason"`
	Quality            string                  `json:"quality"`
	PauseCount         int                     `json:"pause_count"`
	PausedUntil        *time.Time              `json:"paused_until"`
	StatusChangedAt    time.Time               `json:"status_changed_at"`
	ProviderTemplateID string                  `json:"provider_template_id"`
	Number             *NumberRef              `json:"messaging_account"`
	HeaderKind         string                  `json:"header_kind"`
	HeaderText         string                  `json:"header_text"`
	HeaderMediaURL     string                  `json:"header_media_url"`
	BodyParameters     []whatsapp.Binding      `json:"body_parameters"`
	URLButtons         []URLButton             `json:"url_buttons"`
	CreatedAt          time.Time               `json:"created_at"`
	History            []catalog.TemplateEvent `json:"history,omitempty"`
}

// URLButton is a dynamic URL button: its fixed base and default suffix.
type URLButton struct {
	Base          string `json:"base"`
	DefaultSuffix string `json:"default_suffix"`
}

func toTemplate(t catalog.Template, numbers map[int64]catalog.MessagingAccount) Template {
	v := Template{ID: t.ID, Name: t.Name, Language: t.Language, Category: t.Category, Status: t.Status, StatusReason: t.StatusReason,
		Quality: t.Quality, PauseCount: t.PauseCount, PausedUntil: utc(t.PausedUntil), StatusChangedAt: t.StatusChangedAt.UTC(),
		ProviderTemplateID: t.ProviderTemplateID, HeaderKind: string(t.HeaderKind), HeaderText: t.HeaderText,
		HeaderMediaURL: t.HeaderMediaURL, BodyParameters: t.BodyParameters, URLButtons: []URLButton{}, CreatedAt: t.CreatedAt.UTC()}
	if v.BodyParameters == nil {
		v.BodyParameters = []whatsapp.Binding{}
	}
	for _, b := range t.URLButtons {
		v.URLButtons = append(v.URLButtons, URLButton{Base: b.Base, DefaultSuffix: b.DefaultSuffix})
	}
	if t.MessagingAccountID != nil {
		n := numbers[*t.MessagingAccountID]
		v.Number = &NumberRef{ID: *t.MessagingAccountID, Name: n.Name, PhoneNumberID: n.PhoneNumberID}
	}
	return v
}

// numbers indexes a company's numbers by id.
func (a *API) numbers(ctx context.Context, companyID int64) (map[int64]catalog.MessagingAccount, error) {
	accts, err := a.templates.Catalog.MessagingAccounts(ctx, companyID)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]catalog.MessagingAccount, len(accts))
	for _, n := range accts {
		out[n.ID] = n
	}
	return out, nil
}

// read is a company's records as read for the path's company: it answers
// 404 for an unknown company and 500 for a failed read (ok false).
func read[T any](a *API, w http.ResponseWriter, r *http.Request, load func(context.Context, int64) (T, error)) (int64, T, bool) {
	var zero T
	id, ok := a.company(w, r)
	if !ok {
		return 0, zero, false
	}
	v, err := load(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return 0, zero, false
	}
	return id, v, true
}

func (a *API) listTemplates(w http.ResponseWriter, r *http.Request) {
	id, tpls, ok := read(a, w, r, a.templates.Catalog.Templates)
	if !ok {
		return
	}
	nums, err := a.numbers(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := make([]Template, 0, len(tpls))
	for _, t := range tpls {
		out = append(out, toTemplate(t, nums))
	}
	writeJSON(w, http.StatusOK, map[string]any{"templates": out})
}

func (a *API) getTemplate(w http.ResponseWriter, r *http.Request) {
	id, ok := a.company(w, r)
	if !ok {
		return
	}
	tid, err := strconv.ParseInt(r.PathValue("tid"), 10, 64)
	if err != nil {
		writeJSON(w, http.StatusNotFound, detail("Template not found"))
		return
	}
	a.showTemplate(w, r, id, tid, http.StatusOK)
}

// showTemplate answers one template with its history.
func (a *API) showTemplate(w http.ResponseWriter, r *http.Request, companyID, id int64, status int) {
	t, err := a.templates.Catalog.CompanyTemplate(r.Context(), companyID, id)
	if errors.Is(err, catalog.ErrNotFound) {
		writeJSON(w, http.StatusNotFound, detail("Template not found"))
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	nums, err := a.numbers(r.Context(), companyID)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	v := toTemplate(t, nums)
	if v.History, err = a.templates.Catalog.TemplateHistory(r.Context(), companyID, id); err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, status, map[string]any{"template": v})
}

// templateBody is the POST body: the definition as the provider takes it
// (name, language, category, parameter_format, components) and Parley's
// bindings.
type templateBody struct {
	MessagingAccountID int64                        `json:"messaging_account_id"`
	Name               string                       `json:"name"`
	Language           string                       `json:"language"`
	Category           string                       `json:"category"`
	ParameterFormat    string                       `json:"parameter_format"`
	Components         []whatsapp.TemplateComponent `json:"components"`
	BodyParameters     []whatsapp.Binding           `json:"body_parameters"`
	HeaderText         string                       `json:"header_text"`
	HeaderMediaURL     string                       `json:"header_media_url"`
	URLButtons         []struct {
		DefaultSuffix string `json:"default_suffix"`
	} `json:"url_buttons"`
}

func (a *API) createTemplate(w http.ResponseWriter, r *http.Request) {
	id, ok := a.company(w, r)
	if !ok {
		return
	}
	var b templateBody
	if !decode(w, r, &b) {
		return
	}
	if b.Language == "" {
		b.Language = "en_US"
	}
	n := waba.NewTemplate{CompanyID: id, MessagingAccountID: b.MessagingAccountID,
		Definition: whatsapp.TemplateDefinition{Name: b.Name, Language: b.Language, Category: b.Category,
			ParameterFormat: b.ParameterFormat, Components: b.Components},
		BodyParameters: b.BodyParameters, HeaderText: b.HeaderText, HeaderMediaURL: b.HeaderMediaURL}
	for _, u := range b.URLButtons {
		n.URLSuffixes = append(n.URLSuffixes, u.DefaultSuffix)
	}
	t, err := a.templates.Submit(r.Context(), n)
	if err != nil {
		a.failTemplate(w, r, err)
		return
	}
	a.log.Info("template submitted", zap.Int64("company_id", id), zap.Int64("template_id", t.ID), zap.String("template", t.Name),
		zap.String("language", t.Language), zap.String("status", t.Status), zap.String("actor", actor.Label))
	a.showTemplate(w, r, id, t.ID, http.StatusCreated)
}

// failTemplate answers a submission's error: 422 for what Parley or the
// provider refuses, 409 for a name taken, 502 when the provider did not
// answer.
func (a *API) failTemplate(w http.ResponseWriter, r *http.Request, err error) {
	var inv *waba.InvalidError
	var refused *waba.RefusedError
	var we *whatsapp.Error
	switch {
	case errors.As(err, &inv):
		writeValidation(w, fieldItem(inv.Field, inv.Msg))
	case errors.Is(err, catalog.ErrInvalid):
		writeValidation(w, fieldItem("body_parameters", "each binding's source is first_name, last_name, phone, variable (with a name) or literal"))
	case errors.Is(err, waba.ErrAccountNotFound):
		writeValidation(w, fieldItem("messaging_account_id", "the company has no messaging account with this id"))
	case errors.Is(err, catalog.ErrConflict):
		writeJSON(w, http.StatusConflict, detail("The company already has a template of this name and language"))
	case errors.As(err, &refused) && errors.As(err, &we) && we.Code != 0:
		writeJSON(w, http.StatusUnprocessableEntity, detail(refused.Error()))
	case errors.As(err, &refused):
		writeJSON(w, http.StatusBadGateway, detail(refused.Error()))
	default:
		a.fail(w, r, err)
	}
}

// Number is a messaging account as the numbers' route shows it: its
// quality and its portfolio's messaging limit.
type Number struct {
	ID               int64      `json:"id"`
	Name             string     `json:"name"`
	PhoneNumberID    string     `json:"phone_number_id"`
	Connected        bool       `json:"connected"`
	WABAID           string     `json:"waba_id"`
	PortfolioID      string     `json:"portfolio_id"`
	QualityRating    string     `json:"quality_rating"`
	QualityUpdatedAt *time.Time `json:"quality_updated_at"`
	Tier             string     `json:"tier"`
	Limit            int        `json:"limit"`
	TierSource       string     `json:"tier_source"`
}

func (a *API) listNumbers(w http.ResponseWriter, r *http.Request) {
	_, ps, ok := read(a, w, r, a.templates.Catalog.Portfolios)
	if !ok {
		return
	}
	out := []Number{}
	for _, p := range ps {
		for _, n := range p.Numbers {
			out = append(out, Number{ID: n.ID, Name: n.Name, PhoneNumberID: n.PhoneNumberID, Connected: n.Connected, WABAID: n.WABA(),
				PortfolioID: p.ID, QualityRating: n.QualityRating, QualityUpdatedAt: utc(n.QualityUpdatedAt), Tier: p.Tier, Limit: p.Limit,
				TierSource: p.Source})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"numbers": out})
}

// Portfolio is a business portfolio with its tier and its numbers.
type Portfolio struct {
	ID        string      `json:"portfolio_id"`
	Tier      string      `json:"tier"`
	Limit     int         `json:"limit"`
	Source    string      `json:"source"`
	UpdatedAt *time.Time  `json:"updated_at"`
	Numbers   []NumberRef `json:"numbers"`
}

func toPortfolio(p catalog.Portfolio) Portfolio {
	v := Portfolio{ID: p.ID, Tier: p.Tier, Limit: p.Limit, Source: p.Source, UpdatedAt: utc(p.UpdatedAt), Numbers: []NumberRef{}}
	for _, n := range p.Numbers {
		v.Numbers = append(v.Numbers, NumberRef{ID: n.ID, Name: n.Name, PhoneNumberID: n.PhoneNumberID})
	}
	return v
}

func (a *API) listPortfolios(w http.ResponseWriter, r *http.Request) {
	_, ps, ok := read(a, w, r, a.templates.Catalog.Portfolios)
	if !ok {
		return
	}
	out := make([]Portfolio, 0, len(ps))
	for _, p := range ps {
		out = append(out, toPortfolio(p))
	}
	writeJSON(w, http.StatusOK, map[string]any{"portfolios": out})
}

func (a *API) putPortfolio(w http.ResponseWriter, r *http.Request) {
	id, ok := a.company(w, r)
	if !ok {
		return
	}
	var b struct {
		Tier string `json:"tier"`
	}
	if !decode(w, r, &b) {
		return
	}
	pid := r.PathValue("pid")
	err := a.templates.Catalog.SetPortfolioTier(r.Context(), id, pid, b.Tier, catalog.TierFromOperator)
	switch {
	case errors.Is(err, catalog.ErrInvalid):
		writeValidation(w, fieldItem("tier", "tier is TIER_250, TIER_2K, TIER_10K, TIER_100K or TIER_UNLIMITED"))
		return
	case errors.Is(err, catalog.ErrNotFound):
		writeJSON(w, http.StatusNotFound, detail("Portfolio not found: none of the company's numbers is in it"))
		return
	case err != nil:
		a.fail(w, r, err)
		return
	}
	a.log.Info("portfolio tier set", zap.Int64("company_id", id), zap.String("portfolio_id", pid), zap.String("tier", b.Tier),
		zap.String("actor", actor.Label))
	ps, err := a.templates.Catalog.Portfolios(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	for _, p := range ps {
		if p.ID == pid {
			writeJSON(w, http.StatusOK, map[string]any{"portfolio": toPortfolio(p)})
			return
		}
	}
	a.fail(w, r, errors.New("portfolio vanished after its tier was set"))
}
