package console

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/apikey"
	"github.com/parleyhq/parley/pkg/webhooks"
	"github.com/parleyhq/parley/services/admin/internal/accounts"
	"github.com/parleyhq/parley/services/admin/internal/conversations"
	"github.com/parleyhq/parley/services/admin/internal/credentials"
)

// pages are the parsed templates, one set per page, each with the layout.
type pages struct {
	signIn, credentials, revokeConfirm, errorPage, sends, batch, cancelConfirm *template.Template
	webhooks, webhook, webhookDelete                                           *template.Template
	conversations, thread                                                      *template.Template
	subjects, report                                                           *template.Template
	templates, template, numbers                                               *template.Template
}

var funcs = template.FuncMap{
	"datetime": func(v any) string {
		switch t := v.(type) {
		case time.Time:
			return formatTime(t)
		case *time.Time:
			if t != nil {
				return formatTime(*t)
			}
		}
		return ""
	},
	"lastUsed": func(t *time.Time) string {
		if t == nil {
			return "Never"
		}
		return formatTime(*t)
	},
	"until": func(now time.Time, t *time.Time) string {
		if t == nil {
			return ""
		}
		return remaining(t.Sub(now))
	},
	"masked": func(k apikey.Key) string { return k.Masked() },
	"actionLabel": func(action string) string {
		switch action {
		case "create":
			return "Created"
		case "rotate":
			return "Rotated (new key)"
		case "revoke":
			return "Revoked"
		default:
			return action
		}
	},
	"graceHours": func() int { return int(apikey.GracePeriod / time.Hour) },
	"bar":        progressBar,
	"stateLabel": func(st string) string { return styleOf(st).Label },
	"kindLabel": func(kind string) string {
		switch kind {
		case "campaign":
			return "Campaign"
		case "automation":
			return "Automation"
		case "batch":
			return "Batch"
		case "connector":
			return "Connector"
		case "reply":
			return "Reply"
		}
		return kind
	},
	// left is the time from now to t, as a countdown.
	"left": func(now, t time.Time) string { return remaining(t.Sub(now)) },
	// via names what sent an outbound message: Campaign "Spring sale", Reply.
	"via": func(s string) string {
		if s == "" {
			return s
		}
		return strings.ToUpper(s[:1]) + s[1:]
	},
	"displayName": conversations.DisplayName,
	"msgStateClass": func(state string) string {
		switch state {
		case "sent", "delivered", "read":
			return "pill-ok"
		case "failed":
			return "pill-bad"
		case "cancelled", "skipped_opt_out":
			return "pill-off"
		}
		return "pill-warn"
	},
	// tplStatusClass colours a template's status at the provider.
	"tplStatusClass": func(status string) string {
		switch status {
		case "APPROVED":
			return "pill-ok"
		case "REJECTED", "DISABLED":
			return "pill-bad"
		}
		return "pill-warn"
	},
	// qualityClass colours a quality rating (GREEN, YELLOW, RED, UNKNOWN).
	"qualityClass": func(q string) string {
		switch q {
		case "GREEN":
			return "pill-ok"
		case "YELLOW":
			return "pill-warn"
		case "RED":
			return "pill-bad"
		}
		return "pill-off"
	},
	"statusClass": func(status string) string {
		switch status {
		case "completed":
			return "pill-ok"
		case "failed":
			return "pill-bad"
		case "cancelled":
			return "pill-off"
		}
		return "pill-warn"
	},
	"statusLabel": func(status string) string {
		switch status {
		case "accepted":
			return "Accepted"
		case "scheduled":
			return "Scheduled"
		case "processing":
			return "Sending"
		case "completed":
			return "Completed"
		case "failed":
			return "Failed"
		case "cancelled":
			return "Cancelled"
		}
		return status
	},
	"deliveryClass": deliveryClass,
	"typesText":     typesText,
	"overlapHours":  func() int { return int(webhooks.RotationOverlap / time.Hour) },
	"count":         formatCount,
	"rate":          formatRate,
	"rateValue": func(r *float64) string {
		if r == nil {
			return ""
		}
		return strconv.FormatFloat(*r, 'f', -1, 64)
	},
	"day":  func(t time.Time) string { return t.UTC().Format("2 Jan 2006") },
	"step": stepLabel,
	"on":   func(p *bool) bool { return p != nil && *p },
	"deref64": func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	},
	"deref": func(p *int) string {
		if p == nil {
			return "–"
		}
		return fmt.Sprint(*p)
	},
}

func parsePages() (*pages, error) {
	parse := func(name string) (*template.Template, error) {
		files := []string{"templates/layout.html", "templates/" + name}
		if name == "webhooks.html" || name == "webhook.html" {
			// The create and edit forms share their fields.
			files = append(files, "templates/webhook_fields.html")
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, files...)
		if err != nil {
			return nil, fmt.Errorf("parse console template %s: %w", name, err)
		}
		return t, nil
	}
	var p pages
	var err error
	for name, dst := range map[string]**template.Template{
		"signin.html":         &p.signIn,
		"credentials.html":    &p.credentials,
		"revoke_confirm.html": &p.revokeConfirm,
		"error.html":          &p.errorPage,
		"sends.html":          &p.sends,
		"batch.html":          &p.batch,
		"cancel_confirm.html": &p.cancelConfirm,
		"webhooks.html":       &p.webhooks,
		"webhook.html":        &p.webhook,
		"webhook_delete.html": &p.webhookDelete,
		"conversations.html":  &p.conversations,
		"thread.html":         &p.thread,
		"subjects.html":       &p.subjects,
		"report.html":         &p.report,
		"templates.html":      &p.templates,
		"template.html":       &p.template,
		"numbers.html":        &p.numbers,
	} {
		if *dst, err = parse(name); err != nil {
			return nil, err
		}
	}
	return &p, nil
}

// formatCount writes a count with thousands separators: 1,234,567.
func formatCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// formatRate writes a report's ratio as a percentage with one decimal, or
// a dash when it has no denominator.
func formatRate(r *float64) string {
	if r == nil {
		return "–"
	}
	return strconv.FormatFloat(*r*100, 'f', 1, 64) + "%"
}

// formatTime is how the console writes a moment: in UTC, said so.
func formatTime(t time.Time) string { return t.UTC().Format("2 Jan 2006, 15:04 UTC") }

// remaining writes a duration the way a person reads a countdown.
func remaining(d time.Duration) string {
	switch {
	case d <= 0:
		return "now"
	case d < time.Minute:
		return "less than a minute"
	}
	h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
	if h == 0 {
		return fmt.Sprintf("%d m", m)
	}
	return fmt.Sprintf("%d h %d m", h, m)
}

// view is what the layout needs, plus the page's own data.
type view struct {
	Title string
	// Nav is the sidebar entry of the page: "sends", "campaigns",
	// "automations", "conversations", "credentials" or "webhooks".
	Nav     string
	User    *accounts.User
	Company credentials.Company
	FlashOK string
	FlashNo string
	Page    any
}

// credentialsView is the Credentials page.
type credentialsView struct {
	credentials.Overview
	CanManage bool
	// NewKey is set only in the response to the create or rotate that made it.
	NewKey *newKeyView
}

type newKeyView struct {
	Full     string
	Key      apikey.Key
	Rotated  bool
	Previous apikey.Key
}

type revokeView struct {
	Now    time.Time
	Key    apikey.Key
	Active bool
}

type errorView struct {
	Status  int
	Heading string
	Message string
}

type signInView struct {
	Email string
	Error string
}

// render writes a page with status, taking the session's notices with it.
// renderPage renders t for the signed-in user with their company (500 when
// the company cannot be read).
func (c *Console) renderPage(w http.ResponseWriter, r *http.Request, status int, t *template.Template, title, nav string, page any) {
	u := currentUser(r.Context())
	co, err := c.Credentials.Company(r.Context(), u.CompanyID)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	c.render(w, r, status, t, view{Title: title, Nav: nav, User: &u, Company: co, Page: page})
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, t *template.Template, v view) {
	if r.Context().Value(sessionLoadedKey{}) != nil {
		v.FlashOK = c.Sessions.PopString(r.Context(), sessionFlashOK)
		v.FlashNo = c.Sessions.PopString(r.Context(), sessionFlashNo)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, v); err != nil {
		c.Log.Error("render console page", zap.String("path", r.URL.Path), zap.Error(err))
		http.Error(w, "Internal server error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// renderError writes an error page, inside the shell when someone is
// signed in.
func (c *Console) renderError(w http.ResponseWriter, r *http.Request, status int, heading, message string) {
	v := view{Title: heading, Page: errorView{Status: status, Heading: heading, Message: message}}
	if u, ok := r.Context().Value(userKey{}).(accounts.User); ok {
		v.User = &u
		if co, err := c.Credentials.Company(r.Context(), u.CompanyID); err == nil {
			v.Company = co
		}
	}
	c.render(w, r, status, c.pages.errorPage, v)
}

// serverError logs err and answers 500 without saying what went wrong.
func (c *Console) serverError(w http.ResponseWriter, r *http.Request, err error) {
	c.Log.Error("console request failed", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
	c.renderError(w, r, http.StatusInternalServerError, "Something went wrong",
		"We could not complete this request. Please try again in a moment.")
}
