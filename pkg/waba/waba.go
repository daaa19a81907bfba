// Package waba keeps Parley's templates and numbers in step with the
// WhatsApp Business Accounts (WABAs) they belong to: a template created
// through Parley is submitted to its number's WABA (Submit), the WABAs'
// webhooks about templates and numbers are applied as they come
// (ApplyChanges), and a periodic full sync lists each WABA's templates to
// catch what a webhook missed (SyncTemplates). Every change of a template's
// status goes through record.ApplyTemplateChange, which holds, releases or
// fails the template's messages and emits template.status_changed.
package waba

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/record"
)

// Provider is the template management of the Cloud API (*whatsapp.Client).
type Provider interface {
	CreateTemplate(ctx context.Context, acct whatsapp.Account, wabaID string, d whatsapp.TemplateDefinition) (whatsapp.TemplateCreated, error)
	ListTemplates(ctx context.Context, acct whatsapp.Account, wabaID string) ([]whatsapp.MessageTemplate, error)
}

// Deps is what the package's functions use. Catalog must open access
// tokens (a store with the token box) for Submit and SyncTemplates, which
// also need the Provider; ApplyChanges needs neither.
type Deps struct {
	Pool     *pgxpool.Pool
	Catalog  *catalog.Store
	Provider Provider
	Log      *zap.Logger
}

// Errors of a submission, for the callers' status codes.
var (
	// ErrInvalid is a definition or binding Parley refuses before asking
	// the provider; its message says what to change.
	ErrInvalid = errors.New("invalid template")
	// ErrAccountNotFound is a messaging account the company does not have.
	ErrAccountNotFound = errors.New("messaging account not found")
)

// RefusedError is the provider's refusal of a submission (or no answer):
// nothing was kept in Parley.
type RefusedError struct {
	// Err is the *whatsapp.Error with the provider's code and message.
	Err error
}

func (e *RefusedError) Error() string {
	var we *whatsapp.Error
	if errors.As(e.Err, &we) && we.Code == 0 {
		return "the provider did not take the template (" + we.Message + "); nothing was kept: try again"
	}
	return "the provider refused the template: " + strings.TrimPrefix(e.Err.Error(), "whatsapp: ")
}

func (e *RefusedError) Unwrap() error { return e.Err }

// parleyStatus maps a provider status (a template's, or the event of a
// message_template_status_update) to the one Parley keeps; ok is false for
// a status Parley does not act on (FLAGGED: a warning that may precede a
// pause; IN_APPEAL, PENDING_DELETION, DELETED, LIMIT_EXCEEDED, ...).
// REINSTATED is an appeal won: APPROVED again.
func parleyStatus(s string) (string, bool) {
	switch s {
	case whatsapp.TemplatePending, whatsapp.TemplateApproved, whatsapp.TemplateRejected, whatsapp.TemplatePaused, whatsapp.TemplateDisabled:
		return s, true
	case "REINSTATED":
		return whatsapp.TemplateApproved, true
	}
	return "", false
}

// reasonOf is the reason Parley keeps for a rejection ("" for Meta's NONE).
func reasonOf(r string) string {
	if r == "NONE" {
		return ""
	}
	return r
}

var untilRE = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)`)

// pausedUntil is when a pause ends: the time its description names (as
// provider-sim writes it), else its start plus Meta's 3 hours (FIRST_PAUSE)
// or 6 (SECOND_PAUSE); zero when neither is known.
func pausedUntil(info *whatsapp.TemplateOtherInfo, at time.Time) time.Time {
	if info == nil {
		return time.Time{}
	}
	if m := untilRE.FindString(info.Description); m != "" {
		if t, err := time.Parse(time.RFC3339Nano, m); err == nil {
			return t
		}
	}
	if at.IsZero() {
		return time.Time{}
	}
	switch info.Title {
	case "FIRST_PAUSE":
		return at.Add(3 * time.Hour)
	case "SECOND_PAUSE":
		return at.Add(6 * time.Hour)
	}
	return time.Time{}
}

// providerID is a webhook's template id as the list and the create name it.
func providerID(id int64) string {
	if id <= 0 {
		return ""
	}
	return strconv.FormatInt(id, 10)
}

// match finds the templates a provider's template is among tpls: by its
// provider id, else (for those Parley has no id for) by name and language.
// Several companies may share a WABA, so there may be several.
func match(tpls []catalog.Template, id, name, language string) []catalog.Template {
	var byID, byName []catalog.Template
	for _, t := range tpls {
		switch {
		case id != "" && t.ProviderTemplateID == id:
			byID = append(byID, t)
		case t.ProviderTemplateID == "" && t.Name == name && t.Language == language:
			byName = append(byName, t)
		}
	}
	return append(byID, byName...)
}

// adopt records the provider's id of a template Parley matched by name.
func adopt(ctx context.Context, d Deps, t catalog.Template, id string) error {
	if t.ProviderTemplateID != "" || id == "" {
		return nil
	}
	return d.Catalog.SetProviderTemplateID(ctx, t.CompanyID, t.ID, id)
}

// applyStatus changes a template's status through the record.
func applyStatus(ctx context.Context, d Deps, t catalog.Template, c record.TemplateChange) (bool, error) {
	c.CompanyID, c.TemplateID = t.CompanyID, t.ID
	out, err := record.ApplyTemplateChange(ctx, d.Pool, c)
	if err != nil {
		return false, err
	}
	if out.Changed {
		d.Log.Info("template status changed", zap.Int64("company_id", t.CompanyID), zap.Int64("template_id", t.ID),
			zap.String("template", t.Name), zap.String("language", t.Language), zap.String("from", out.Previous),
			zap.String("to", out.Status), zap.String("source", c.Source), zap.Int("held", out.Held),
			zap.Int("released", out.Released), zap.Int("failed", out.Failed))
	}
	return out.Changed, nil
}
