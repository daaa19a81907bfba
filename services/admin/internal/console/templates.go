package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/waba"
)

// Paths of the templates' and numbers' pages.
const (
	PathTemplates = "/templates"
	PathNumbers   = "/numbers"
)

// tplReserved is what a member who posts the create form is told.
const tplReserved = "Creating templates is reserved for your company's admins. Ask one of them if a template is needed."

// TemplateDeps is what the templates' and numbers' pages use.
type TemplateDeps struct {
	// Catalog reads templates, numbers and portfolios.
	Catalog *catalog.Store
	// Submit creates a template through the provider (waba.Submit).
	Submit func(ctx context.Context, n waba.NewTemplate) (catalog.Template, error)
}

func (c *Console) routeTemplates(mux *http.ServeMux) {
	mux.Handle("GET "+PathTemplates, c.requireUser(c.templatesPage))
	mux.Handle("POST "+PathTemplates, c.requireAdminFor(tplReserved, c.createTemplate))
	mux.Handle("GET "+PathTemplates+"/{id}", c.requireUser(c.templatePage))
	mux.Handle("GET "+PathNumbers, c.requireUser(c.numbersPage))
}

// templateForm is the create form: what was typed, and what was wrong.
type templateForm struct {
	AccountID, Name, Language, Category string
	Components, BodyParameters          string
	HeaderText, HeaderMediaURL          string
	URLSuffix1, URLSuffix2              string
	Errors                              map[string]string
}

// templatesView is the Templates page.
type templatesView struct {
	Templates []catalog.Template
	Numbers   map[int64]catalog.MessagingAccount
	Accounts  []catalog.MessagingAccount
	CanManage bool
	Form      templateForm
}

// Number names a template's number ("" when registered by hand).
func (v templatesView) Number(id *int64) string {
	if id == nil {
		return ""
	}
	n := v.Numbers[*id]
	return n.Name + " (" + n.PhoneNumberID + ")"
}

func (c *Console) templatesPage(w http.ResponseWriter, r *http.Request) {
	c.renderTemplates(w, r, http.StatusOK, templateForm{Language: "en_US", Category: whatsapp.CategoryUtility})
}

func (c *Console) renderTemplates(w http.ResponseWriter, r *http.Request, status int, form templateForm) {
	u := currentUser(r.Context())
	tpls, err := c.Templates.Catalog.Templates(r.Context(), u.CompanyID)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	accts, err := c.Templates.Catalog.MessagingAccounts(r.Context(), u.CompanyID)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	v := templatesView{Templates: tpls, Accounts: accts, Numbers: map[int64]catalog.MessagingAccount{}, CanManage: u.IsAdmin(), Form: form}
	for _, a := range accts {
		v.Numbers[a.ID] = a
	}
	c.renderPage(w, r, status, c.pages.templates, "Templates", "templates", v)
}

// templateView is one template's page.
type templateView struct {
	Template catalog.Template
	Number   string
	History  []catalog.TemplateEvent
}

func (c *Console) templatePage(w http.ResponseWriter, r *http.Request) {
	u := currentUser(r.Context())
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	var t catalog.Template
	if err == nil {
		t, err = c.Templates.Catalog.CompanyTemplate(r.Context(), u.CompanyID, id)
	}
	if err != nil {
		if errors.Is(err, catalog.ErrNotFound) || errors.Is(err, strconv.ErrSyntax) || errors.Is(err, strconv.ErrRange) {
			c.renderError(w, r, http.StatusNotFound, "Template not found", "Your company has no template with this id.")
			return
		}
		c.serverError(w, r, err)
		return
	}
	v := templateView{Template: t}
	if t.MessagingAccountID != nil {
		if n, err := c.Templates.Catalog.MessagingAccount(r.Context(), *t.MessagingAccountID); err == nil {
			v.Number = n.Name + " (" + n.PhoneNumberID + ")"
		}
	}
	if v.History, err = c.Templates.Catalog.TemplateHistory(r.Context(), u.CompanyID, t.ID); err != nil {
		c.serverError(w, r, err)
		return
	}
	c.renderPage(w, r, http.StatusOK, c.pages.template, t.Name+" ("+t.Language+")", "templates", v)
}

func templateFormOf(r *http.Request) templateForm {
	g := r.PostForm.Get
	return templateForm{AccountID: g("messaging_account_id"), Name: strings.TrimSpace(g("name")), Language: strings.TrimSpace(g("language")),
		Category: g("category"), Components: g("components"), BodyParameters: g("body_parameters"), HeaderText: g("header_text"),
		HeaderMediaURL: g("header_media_url"), URLSuffix1: g("url_suffix_1"), URLSuffix2: g("url_suffix_2"), Errors: map[string]string{}}
}

// newTemplate reads the form into a submission; what cannot be read is
// in form.Errors.
func newTemplate(companyID int64, form *templateForm) waba.NewTemplate {
	n := waba.NewTemplate{CompanyID: companyID, HeaderText: form.HeaderText, HeaderMediaURL: form.HeaderMediaURL,
		Definition: whatsapp.TemplateDefinition{Name: form.Name, Language: form.Language, Category: form.Category}}
	id, err := strconv.ParseInt(form.AccountID, 10, 64)
	if err != nil {
		form.Errors["messaging_account_id"] = "Choose the number whose WhatsApp Business Account gets the template."
	}
	n.MessagingAccountID = id
	if err := json.Unmarshal([]byte(form.Components), &n.Definition.Components); err != nil {
		form.Errors["components"] = "Components must be a JSON array of the provider's components: " + err.Error()
	}
	if strings.TrimSpace(form.BodyParameters) != "" {
		if err := json.Unmarshal([]byte(form.BodyParameters), &n.BodyParameters); err != nil {
			form.Errors["body_parameters"] = "Body bindings must be a JSON array such as [{\"source\": \"first_name\", \"default\": \"there\"}]: " + err.Error()
		}
	}
	for _, s := range []string{form.URLSuffix1, form.URLSuffix2} {
		if s != "" {
			n.URLSuffixes = append(n.URLSuffixes, s)
		}
	}
	return n
}

func (c *Console) createTemplate(w http.ResponseWriter, r *http.Request) {
	if !c.readForm(w, r) {
		return
	}
	u := currentUser(r.Context())
	form := templateFormOf(r)
	n := newTemplate(u.CompanyID, &form)
	if len(form.Errors) > 0 {
		c.renderTemplates(w, r, http.StatusUnprocessableEntity, form)
		return
	}
	t, err := c.Templates.Submit(r.Context(), n)
	if msg, field, status := submitProblem(err); msg != "" {
		form.Errors[field] = msg
		c.renderTemplates(w, r, status, form)
		return
	}
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	c.Log.Info("template submitted", zap.Int64("company_id", u.CompanyID), zap.Int64("user_id", u.ID), zap.Int64("template_id", t.ID),
		zap.String("template", t.Name), zap.String("language", t.Language))
	c.flash(r, true, "Template "+t.Name+" ("+t.Language+") was submitted to WhatsApp: it is "+t.Status+" until WhatsApp reviews it.")
	http.Redirect(w, r, PathTemplates+"/"+strconv.FormatInt(t.ID, 10), http.StatusSeeOther)
}

// submitProblem is what the form says of a submission's error, the field
// it belongs to ("form": the whole form) and the status; "" for an error
// the form cannot help with.
func submitProblem(err error) (msg, field string, status int) {
	var inv *waba.InvalidError
	var refused *waba.RefusedError
	switch {
	case err == nil:
	case errors.As(err, &inv):
		return inv.Msg, inv.Field, http.StatusUnprocessableEntity
	case errors.Is(err, catalog.ErrInvalid):
		return "Each binding's source is first_name, last_name, phone, variable (with a name) or literal.", "body_parameters", http.StatusUnprocessableEntity
	case errors.Is(err, waba.ErrAccountNotFound):
		return "Choose one of your company's numbers.", "messaging_account_id", http.StatusUnprocessableEntity
	case errors.Is(err, catalog.ErrConflict):
		return "Your company already has a template of this name and language.", "name", http.StatusConflict
	case errors.As(err, &refused):
		return strings.ToUpper(refused.Error()[:1]) + refused.Error()[1:] + ".", "form", http.StatusUnprocessableEntity
	}
	return "", "", 0
}

// numbersView is the Numbers page: each portfolio with its numbers.
type numbersView struct {
	Portfolios []catalog.Portfolio
}

func (c *Console) numbersPage(w http.ResponseWriter, r *http.Request) {
	ps, err := c.Templates.Catalog.Portfolios(r.Context(), currentUser(r.Context()).CompanyID)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	c.renderPage(w, r, http.StatusOK, c.pages.numbers, "Numbers", "numbers", numbersView{Portfolios: ps})
}
