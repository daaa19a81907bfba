package waba

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/record"
)

// Submit creates a template through Parley: checked (ErrInvalid), stored
// PENDING with its definition and its number (catalog.ErrConflict when the
// company has one of that name and language), submitted to the number's
// WABA with its token, the provider's id stored and the provider's answer
// applied (record.ApplyTemplateChange, source submit: a template the
// provider approves or rejects at once). A refusal, or no answer, is a
// *RefusedError and the template is removed: nothing is kept. The
// template's later review comes by webhook (ApplyChanges) or by the sync.
func Submit(ctx context.Context, d Deps, n NewTemplate) (catalog.Template, error) {
	n.Definition.Category = strings.ToUpper(n.Definition.Category)
	tpl, err := Bindings(n)
	if err != nil {
		return catalog.Template{}, err
	}
	acct, token, err := submitter(ctx, d, n)
	if err != nil {
		return catalog.Template{}, err
	}
	def, err := json.Marshal(n.Definition)
	if err != nil {
		return catalog.Template{}, fmt.Errorf("encode template %s: %w", n.Definition.Name, err)
	}
	t, err := d.Catalog.CreateTemplate(ctx, catalog.NewTemplate{CompanyID: n.CompanyID, Template: tpl, Category: n.Definition.Category,
		Submission: &catalog.Submission{MessagingAccountID: acct.ID, Definition: def}})
	if err != nil {
		return catalog.Template{}, err
	}
	created, err := d.Provider.CreateTemplate(ctx, whatsapp.Account{PhoneNumberID: acct.PhoneNumberID, AccessToken: token}, acct.WABA(), n.Definition)
	if err != nil {
		if derr := d.Catalog.DeleteTemplate(context.WithoutCancel(ctx), t.CompanyID, t.ID); derr != nil {
			return catalog.Template{}, errors.Join(&RefusedError{Err: err}, fmt.Errorf("remove the refused template %d: %w", t.ID, derr))
		}
		d.Log.Info("template refused by the provider", zap.Int64("company_id", t.CompanyID), zap.String("template", t.Name),
			zap.String("language", t.Language), zap.String("waba_id", acct.WABA()), zap.Error(err))
		return catalog.Template{}, &RefusedError{Err: err}
	}
	if err := accept(ctx, d, t, created); err != nil {
		return catalog.Template{}, err
	}
	return d.Catalog.CompanyTemplate(ctx, t.CompanyID, t.ID)
}

// submitter is the company's number the template goes through, and its
// token.
func submitter(ctx context.Context, d Deps, n NewTemplate) (catalog.MessagingAccount, string, error) {
	acct, err := d.Catalog.MessagingAccount(ctx, n.MessagingAccountID)
	if errors.Is(err, catalog.ErrNotFound) || err == nil && acct.CompanyID != n.CompanyID {
		return catalog.MessagingAccount{}, "", fmt.Errorf("%w: %d", ErrAccountNotFound, n.MessagingAccountID)
	}
	if err != nil {
		return catalog.MessagingAccount{}, "", err
	}
	token, err := d.Catalog.AccessToken(ctx, acct.ID)
	if err != nil {
		return catalog.MessagingAccount{}, "", err
	}
	return acct, token, nil
}

// accept records the provider's answer to a submission: its id, its
// category (Meta may change it), and its status when it is not PENDING
// already (a webhook that came first is never undone by a PENDING answer).
func accept(ctx context.Context, d Deps, t catalog.Template, created whatsapp.TemplateCreated) error {
	if err := d.Catalog.SetProviderTemplateID(ctx, t.CompanyID, t.ID, created.ID); err != nil {
		return err
	}
	if created.Category != "" && created.Category != t.Category {
		if _, err := d.Catalog.SetTemplateCategory(ctx, t.ID, created.Category); err != nil {
			return err
		}
	}
	status, ok := parleyStatus(created.Status)
	if !ok || status == whatsapp.TemplatePending {
		return nil
	}
	_, err := applyStatus(ctx, d, t, record.TemplateChange{Status: status, Source: record.SourceSubmit})
	return err
}
