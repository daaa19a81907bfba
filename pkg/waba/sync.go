package waba

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/record"
)

// SyncTemplates is the backstop of the webhooks: it lists the templates of
// each WABA of the connected numbers (with the token of its oldest
// connected number) and applies what differs from Parley's: the status
// through record.ApplyTemplateChange (source sync; a rejection with its
// reason), the quality and the category, and the provider's id of a
// template Parley knew by name only. A template the provider does not list
// is left as it is. changed counts the templates' statuses, qualities and
// categories changed. A WABA that cannot be read is logged and skipped; the
// others are synced, and the error joins what failed. Running it twice, or
// in two processes at once, is harmless (each change applies once); the
// dispatchers run it under an advisory lock so that one does the work.
func SyncTemplates(ctx context.Context, d Deps) (changed int, err error) {
	wabas, err := d.Catalog.WABAs(ctx)
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, acct := range wabas {
		n, err := syncWABA(ctx, d, acct)
		changed += n
		if err != nil {
			if ctx.Err() != nil {
				return changed, ctx.Err()
			}
			d.Log.Warn("template sync: WABA skipped", zap.String("waba_id", acct.WABA()), zap.Int64("account_id", acct.ID), zap.Error(err))
			errs = append(errs, fmt.Errorf("WABA %s: %w", acct.WABA(), err))
		}
	}
	return changed, errors.Join(errs...)
}

func syncWABA(ctx context.Context, d Deps, acct catalog.MessagingAccount) (int, error) {
	token, err := d.Catalog.AccessToken(ctx, acct.ID)
	if err != nil {
		return 0, err
	}
	listed, err := d.Provider.ListTemplates(ctx, whatsapp.Account{PhoneNumberID: acct.PhoneNumberID, AccessToken: token}, acct.WABA())
	if err != nil {
		return 0, err
	}
	tpls, err := d.Catalog.WABATemplates(ctx, acct.WABA())
	if err != nil {
		return 0, err
	}
	changed := 0
	for _, m := range listed {
		for _, t := range match(tpls, m.ID, m.Name, m.Language) {
			n, err := syncTemplate(ctx, d, t, m)
			changed += n
			if err != nil {
				return changed, fmt.Errorf("template %d (%s, %s): %w", t.ID, t.Name, t.Language, err)
			}
		}
	}
	return changed, nil
}

// syncTemplate applies what the provider lists of one template.
func syncTemplate(ctx context.Context, d Deps, t catalog.Template, m whatsapp.MessageTemplate) (int, error) {
	if err := adopt(ctx, d, t, m.ID); err != nil {
		return 0, err
	}
	changed := 0
	if status, ok := parleyStatus(m.Status); ok && status != t.Status {
		c := record.TemplateChange{Status: status, Source: record.SourceSync}
		if status == whatsapp.TemplateRejected {
			c.Reason = reasonOf(m.RejectedReason)
		}
		ok, err := applyStatus(ctx, d, t, c)
		if err != nil {
			return changed, err
		}
		if ok {
			changed++
		}
	}
	fields := []fieldUpdate{{m.Category, t.Category, d.Catalog.SetTemplateCategory}}
	if m.QualityScore != nil {
		fields = append(fields, fieldUpdate{m.QualityScore.Score, t.Quality, d.Catalog.SetTemplateQuality})
	}
	for _, f := range fields {
		if f.value == "" || f.value == f.had {
			continue
		}
		ok, err := f.set(ctx, t.ID, f.value)
		if err != nil {
			return changed, err
		}
		if ok {
			changed++
		}
	}
	return changed, nil
}

// fieldUpdate is a template's field as listed (value) and as Parley had it.
type fieldUpdate struct {
	value, had string
	set        func(context.Context, int64, string) (bool, error)
}
