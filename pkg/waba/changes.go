package waba

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/record"
)

// Applied counts what ApplyChanges did.
type Applied struct {
	// Templates is the template statuses changed; Qualities and Categories
	// the templates' quality scores and categories changed.
	Templates, Qualities, Categories int
	// Numbers is the numbers whose quality changed, Portfolios the
	// portfolios whose tier was recorded.
	Numbers, Portfolios int
	// Ignored is the changes about a template or number Parley does not
	// have, or with an event it does not act on (each logged).
	Ignored int
}

// ApplyChanges applies the WABA webhooks' changes, in order:
// message_template_status_update through record.ApplyTemplateChange (source
// webhook; a pause's other_info title as its reason and its end as
// PausedUntil), message_template_quality_update to the template's quality,
// template_category_update to its category, phone_number_quality_update to
// the number's quality rating (FLAGGED: RED, UNFLAGGED: YELLOW) and its
// portfolio's tier (source provider). A template is found by its provider
// id, else by name and language, among the companies with a number in the
// change's WABA; a number by its phone number id equal to the change's
// display number (as provider-sim names it), else every number of the WABA
// (Parley keeps no display number). Applying a change twice changes
// nothing; an error is the database's (the caller answers so that the
// provider retries).
func ApplyChanges(ctx context.Context, d Deps, changes []whatsapp.AccountChange) (Applied, error) {
	var out Applied
	templates := map[string][]catalog.Template{}
	for _, c := range changes {
		tpls, ok := templates[c.WABAID]
		if !ok && c.PhoneNumberQuality == nil {
			var err error
			if tpls, err = d.Catalog.WABATemplates(ctx, c.WABAID); err != nil {
				return out, err
			}
			templates[c.WABAID] = tpls
		}
		if err := applyChange(ctx, d, c, tpls, &out); err != nil {
			return out, fmt.Errorf("%s of WABA %s: %w", c.Field, c.WABAID, err)
		}
	}
	return out, nil
}

func applyChange(ctx context.Context, d Deps, c whatsapp.AccountChange, tpls []catalog.Template, out *Applied) error {
	switch {
	case c.TemplateStatus != nil:
		return templateStatus(ctx, d, c, tpls, out)
	case c.TemplateQuality != nil:
		v := c.TemplateQuality
		return templateField(ctx, d, c, match(tpls, providerID(v.MessageTemplateID), v.MessageTemplateName, v.MessageTemplateLanguage),
			providerID(v.MessageTemplateID), v.NewQualityScore, d.Catalog.SetTemplateQuality, &out.Qualities, out)
	case c.TemplateCategory != nil:
		v := c.TemplateCategory
		return templateField(ctx, d, c, match(tpls, providerID(v.MessageTemplateID), v.MessageTemplateName, v.MessageTemplateLanguage),
			providerID(v.MessageTemplateID), v.NewCategory, d.Catalog.SetTemplateCategory, &out.Categories, out)
	case c.PhoneNumberQuality != nil:
		return numberQuality(ctx, d, c, out)
	}
	return nil
}

// ignore logs a change Parley does not act on.
func ignore(d Deps, c whatsapp.AccountChange, why string, out *Applied, fields ...zap.Field) {
	out.Ignored++
	d.Log.Info("provider webhook ignored: "+why, append(fields, zap.String("waba_id", c.WABAID), zap.String("field", c.Field))...)
}

func templateStatus(ctx context.Context, d Deps, c whatsapp.AccountChange, tpls []catalog.Template, out *Applied) error {
	v := c.TemplateStatus
	id := providerID(v.MessageTemplateID)
	found := match(tpls, id, v.MessageTemplateName, v.MessageTemplateLanguage)
	status, ok := parleyStatus(v.Event)
	if !ok || len(found) == 0 {
		ignore(d, c, "no such template, or an event Parley does not act on", out, zap.String("event", v.Event),
			zap.String("template", v.MessageTemplateName), zap.String("language", v.MessageTemplateLanguage), zap.String("provider_template_id", id))
		return nil
	}
	ch := record.TemplateChange{Status: status, Reason: reasonOf(v.Reason), Source: record.SourceWebhook, At: c.At}
	if v.OtherInfo != nil && v.OtherInfo.Title != "" {
		ch.Reason = v.OtherInfo.Title
	}
	if status == whatsapp.TemplatePaused {
		ch.PausedUntil = pausedUntil(v.OtherInfo, c.At)
	}
	for _, t := range found {
		if err := adopt(ctx, d, t, id); err != nil {
			return err
		}
		changed, err := applyStatus(ctx, d, t, ch)
		if err != nil {
			return err
		}
		if changed {
			out.Templates++
		}
	}
	return nil
}

// templateField sets a template's quality or category (set) on each
// template found.
func templateField(ctx context.Context, d Deps, c whatsapp.AccountChange, found []catalog.Template, id, value string,
	set func(context.Context, int64, string) (bool, error), count *int, out *Applied) error {
	if len(found) == 0 || value == "" {
		ignore(d, c, "no such template", out, zap.String("provider_template_id", id))
		return nil
	}
	for _, t := range found {
		if err := adopt(ctx, d, t, id); err != nil {
			return err
		}
		changed, err := set(ctx, t.ID, value)
		if err != nil {
			return err
		}
		if changed {
			*count++
			d.Log.Info("template "+c.Field, zap.Int64("company_id", t.CompanyID), zap.Int64("template_id", t.ID),
				zap.String("template", t.Name), zap.String("language", t.Language), zap.String("value", value))
		}
	}
	return nil
}

// ratingOf is the quality rating a number's event says (Meta: FLAGGED when
// its quality falls to Low, UNFLAGGED when it is back to Medium or High,
// which Parley records as Medium, YELLOW, the lower of the two); ok is
// false for events about its limit only (UPGRADE, DOWNGRADE, ...).
func ratingOf(event string) (string, bool) {
	switch event {
	case "FLAGGED":
		return whatsapp.QualityRed, true
	case "UNFLAGGED":
		return whatsapp.QualityYellow, true
	}
	return "", false
}

// tierOf is the portfolio's tier a number's event carries: the portfolio's
// field first, then the deprecated per-number ones.
func tierOf(v *whatsapp.PhoneNumberQualityUpdate) (string, bool) {
	for _, t := range []string{v.WhatsAppBusinessManagerMessagingLimit, v.MaxDailyConversationsPerBusiness, v.CurrentLimit} {
		if _, ok := whatsapp.TierLimit(t); ok {
			return t, true
		}
	}
	return "", false
}

func numberQuality(ctx context.Context, d Deps, c whatsapp.AccountChange, out *Applied) error {
	v := c.PhoneNumberQuality
	nums, err := d.Catalog.WABAAccounts(ctx, c.WABAID)
	if err != nil {
		return err
	}
	if len(nums) == 0 {
		ignore(d, c, "no number in this WABA", out, zap.String("display_phone_number", v.DisplayPhoneNumber))
		return nil
	}
	nums = numbersOf(d, c, nums)
	if rating, ok := ratingOf(v.Event); ok {
		ids := make([]int64, len(nums))
		for i, a := range nums {
			ids[i] = a.ID
		}
		at := c.At
		if at.IsZero() {
			at = time.Now()
		}
		n, err := d.Catalog.SetAccountQuality(ctx, ids, rating, at)
		if err != nil {
			return err
		}
		out.Numbers += n
	}
	tier, ok := tierOf(v)
	if !ok {
		return nil
	}
	done := map[string]bool{}
	for _, a := range nums {
		key := fmt.Sprint(a.CompanyID, "/", a.Portfolio())
		if done[key] {
			continue
		}
		done[key] = true
		if err := d.Catalog.SetPortfolioTier(ctx, a.CompanyID, a.Portfolio(), tier, catalog.TierFromProvider); err != nil {
			return err
		}
		out.Portfolios++
	}
	return nil
}

// numbersOf is the WABA's numbers the change names: the one whose phone
// number id is its display number's digits, else all of them (logged).
func numbersOf(d Deps, c whatsapp.AccountChange, nums []catalog.MessagingAccount) []catalog.MessagingAccount {
	digits := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, c.PhoneNumberQuality.DisplayPhoneNumber)
	var named []catalog.MessagingAccount
	for _, a := range nums {
		if a.PhoneNumberID == digits {
			named = append(named, a)
		}
	}
	if len(named) > 0 {
		return named
	}
	d.Log.Info("number quality update: display number not matched, applied to every number of the WABA",
		zap.String("waba_id", c.WABAID), zap.String("display_phone_number", c.PhoneNumberQuality.DisplayPhoneNumber), zap.Int("numbers", len(nums)))
	return nums
}
