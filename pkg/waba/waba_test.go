package waba_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
	"github.com/parleyhq/parley/pkg/waba"
)

func TestSubmitThroughTheProvider(t *testing.T) {
	f := newFixture(t)
	f.receive()
	ctx := context.Background()

	tpl, err := waba.Submit(ctx, f.deps, f.newTemplate(orderUpdate("order_update")))
	if err != nil {
		t.Fatal(err)
	}
	if tpl.Status != "PENDING" || tpl.Category != "UTILITY" || tpl.ProviderTemplateID == "" || tpl.MessagingAccountID == nil ||
		*tpl.MessagingAccountID != f.acct.ID || !strings.Contains(string(tpl.Definition), `"Hi {{1}}, your order {{2}} has shipped."`) {
		t.Fatalf("submitted %+v", tpl.TemplateState)
	}
	if tpl.HeaderKind != whatsapp.HeaderText || tpl.HeaderText != "update" || len(tpl.BodyParameters) != 2 ||
		len(tpl.URLButtons) != 1 || tpl.URLButtons[0] != (whatsapp.URLButton{Base: "https://acme.example/track/", DefaultSuffix: "latest"}) {
		t.Fatalf("bindings %+v", tpl.Template)
	}
	at, ok := f.sim.TemplateByID(tpl.ProviderTemplateID)
	if !ok || at.WABAID != "7001" || at.Status != "PENDING" || at.BodyParameters != 2 || at.Header != whatsapp.HeaderText || at.URLButtons != 1 {
		t.Fatalf("the provider has %+v (%v)", at, ok)
	}
	if _, err := f.sim.ReviewTemplate(tpl.ProviderTemplateID, whatsapp.TemplateApproved, ""); err != nil {
		t.Fatal(err)
	}
	f.waitTemplate(tpl.ID, "approved", func(t catalog.Template) bool { return t.Status == "APPROVED" })
	hist, err := f.cat.TemplateHistory(ctx, f.co.ID, tpl.ID)
	if err != nil || len(hist) != 2 || hist[0].Source != "submit" || hist[1].Status != "APPROVED" || hist[1].Source != "webhook" {
		t.Fatalf("history %+v, %v", hist, err)
	}

	spam, err := waba.Submit(ctx, f.deps, f.newTemplate(orderUpdate("spam_offer")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.sim.ReviewTemplate(spam.ProviderTemplateID, whatsapp.TemplateRejected, "SCAM"); err != nil {
		t.Fatal(err)
	}
	f.waitTemplate(spam.ID, "rejected", func(t catalog.Template) bool { return t.Status == "REJECTED" && t.StatusReason == "SCAM" })
}

func TestSubmitRefusals(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.sim.CreateTemplate("7001", orderUpdate("taken_at_provider")); err != nil {
		t.Fatal(err)
	}
	if _, err := waba.Submit(ctx, f.deps, f.newTemplate(orderUpdate("kept"))); err != nil {
		t.Fatal(err)
	}
	other, err := f.cat.CreateCompany(ctx, catalog.NewCompany{Slug: "other", Name: "Other"})
	if err != nil {
		t.Fatal(err)
	}
	auth := orderUpdate("code")
	auth.Category = "AUTHENTICATION"
	named := orderUpdate("named")
	named.ParameterFormat = "NAMED"
	tests := []struct {
		name string
		edit func(*waba.NewTemplate)
		want func(error) bool
	}{
		{"the provider has it already", func(n *waba.NewTemplate) { n.Definition = orderUpdate("taken_at_provider") },
			func(err error) bool {
				var re *waba.RefusedError
				return errors.As(err, &re) && strings.Contains(err.Error(), "already exists")
			}},
		{"Parley has it already", func(n *waba.NewTemplate) { n.Definition = orderUpdate("kept") },
			func(err error) bool { return errors.Is(err, catalog.ErrConflict) }},
		{"a body binding missing", func(n *waba.NewTemplate) { n.BodyParameters = n.BodyParameters[:1] },
			func(err error) bool {
				return errors.Is(err, waba.ErrInvalid) && strings.Contains(err.Error(), "2 variables and 1 bindings")
			}},
		{"no header value", func(n *waba.NewTemplate) { n.HeaderText = "" },
			func(err error) bool {
				return errors.Is(err, waba.ErrInvalid) && strings.Contains(err.Error(), "header_text")
			}},
		{"a suffix too many", func(n *waba.NewTemplate) { n.URLSuffixes = []string{"a", "b"} },
			func(err error) bool { return errors.Is(err, waba.ErrInvalid) }},
		{"authentication", func(n *waba.NewTemplate) { n.Definition = auth },
			func(err error) bool {
				return errors.Is(err, waba.ErrInvalid) && strings.Contains(err.Error(), "one-time codes")
			}},
		{"named parameters", func(n *waba.NewTemplate) { n.Definition = named },
			func(err error) bool {
				return errors.Is(err, waba.ErrInvalid) && strings.Contains(err.Error(), "POSITIONAL")
			}},
		{"another company's number", func(n *waba.NewTemplate) { n.CompanyID, n.Definition = other.ID, orderUpdate("theirs") },
			func(err error) bool { return errors.Is(err, waba.ErrAccountNotFound) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := f.newTemplate(orderUpdate("refused"))
			tt.edit(&n)
			if _, err := waba.Submit(ctx, f.deps, n); !tt.want(err) {
				t.Fatalf("err = %v", err)
			}
		})
	}
	tpls, err := f.cat.Templates(ctx, f.co.ID)
	if err != nil || len(tpls) != 1 || tpls[0].Name != "kept" {
		t.Fatalf("Parley kept %+v, %v", tpls, err)
	}
	if len(f.sim.TemplateStates()) != 2 {
		t.Fatalf("the provider has %+v", f.sim.TemplateStates())
	}
}

// The sim's webhooks keep Parley's templates and numbers in step: reviews,
// pauses (with their end and their reason), quality, category, the
// portfolio's tier; a template registered by hand is found by its name.
func TestWebhooksKeepTemplatesInStep(t *testing.T) {
	f := newFixture(t)
	f.receive()
	ctx := context.Background()
	tpl, err := waba.Submit(ctx, f.deps, f.newTemplate(orderUpdate("order_update")))
	if err != nil {
		t.Fatal(err)
	}
	id := tpl.ProviderTemplateID
	steps := []struct {
		name string
		do   func() (whatsappsim.TemplateState, error)
		want func(catalog.Template) bool
	}{
		{"approved", func() (whatsappsim.TemplateState, error) { return f.sim.ReviewTemplate(id, "APPROVED", "") },
			func(t catalog.Template) bool { return t.Status == "APPROVED" }},
		{"paused", func() (whatsappsim.TemplateState, error) { return f.sim.PauseTemplate(id) },
			func(t catalog.Template) bool {
				return t.Status == "PAUSED" && t.StatusReason == "FIRST_PAUSE" && t.PauseCount == 1 && t.PausedUntil != nil
			}},
		{"unpaused", func() (whatsappsim.TemplateState, error) { return f.sim.UnpauseTemplate(id) },
			func(t catalog.Template) bool {
				return t.Status == "APPROVED" && t.StatusReason == "UNPAUSE" && t.PausedUntil == nil
			}},
		{"re-categorised", func() (whatsappsim.TemplateState, error) { return f.sim.SetTemplateCategory(id, "MARKETING") },
			func(t catalog.Template) bool { return t.Category == "MARKETING" }},
		{"rated red, which pauses it again", func() (whatsappsim.TemplateState, error) { return f.sim.SetTemplateQuality(id, "RED") },
			func(t catalog.Template) bool {
				return t.Quality == "RED" && t.Status == "PAUSED" && t.StatusReason == "SECOND_PAUSE" && t.PauseCount == 2
			}},
		{"unpaused again", func() (whatsappsim.TemplateState, error) { return f.sim.UnpauseTemplate(id) },
			func(t catalog.Template) bool { return t.Status == "APPROVED" }},
		{"disabled the third time", func() (whatsappsim.TemplateState, error) { return f.sim.PauseTemplate(id) },
			func(t catalog.Template) bool { return t.Status == "DISABLED" && t.PauseCount == 3 }},
	}
	for _, s := range steps {
		st, err := s.do()
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		got := f.waitTemplate(tpl.ID, s.name, s.want)
		if s.name == "paused" && !got.PausedUntil.Equal(st.PausedUntil.Truncate(time.Second)) {
			t.Fatalf("paused until %v, the provider says %v", got.PausedUntil, st.PausedUntil)
		}
	}
	hist, err := f.cat.TemplateHistory(ctx, f.co.ID, tpl.ID)
	if err != nil || len(hist) != 7 {
		t.Fatalf("history %+v, %v", hist, err)
	}

	// A template registered by hand, that the provider has for every
	// account, is found by name and language, and learns its provider id.
	legacy, err := f.cat.CreateTemplate(ctx, catalog.NewTemplate{CompanyID: f.co.ID, Template: whatsapp.Template{Name: "legacy", Language: "en_US"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.sim.SetTemplate(whatsappsim.TemplateSpec{Name: "legacy", Language: "en_US"}); err != nil {
		t.Fatal(err)
	}
	st, _ := f.sim.FindTemplate("7001", "legacy", "en_US")
	if _, err := f.sim.PauseTemplate(st.ID); err != nil {
		t.Fatal(err)
	}
	f.waitTemplate(legacy.ID, "paused by name", func(t catalog.Template) bool { return t.Status == "PAUSED" && t.ProviderTemplateID == st.ID })

	// The portfolio's tier, from the provider.
	if err := f.sim.SetPortfolioTier("7001", whatsapp.Tier2K); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ps, err := f.cat.Portfolios(ctx, f.co.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) == 1 && ps[0].Tier == whatsapp.Tier2K && ps[0].Source == "provider" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("portfolios %+v", ps)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Numbers' quality: the number named, else every number of the WABA;
// unknown WABAs and templates are ignored; a change applied twice changes
// nothing the second time.
func TestNumberQualityAndIgnoredChanges(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	support := f.number("Support", "2002", "7001")
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	flagged := func(waba, display, event string) whatsapp.AccountChange {
		return whatsapp.AccountChange{WABAID: waba, At: at, Field: whatsapp.FieldPhoneNumberQuality,
			PhoneNumberQuality: &whatsapp.PhoneNumberQualityUpdate{DisplayPhoneNumber: display, Event: event, CurrentLimit: whatsapp.Tier10K}}
	}
	quality := func() (string, string) {
		t.Helper()
		a, err1 := f.cat.MessagingAccount(ctx, f.acct.ID)
		b, err2 := f.cat.MessagingAccount(ctx, support.ID)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		return a.QualityRating, b.QualityRating
	}
	out, err := waba.ApplyChanges(ctx, f.deps, []whatsapp.AccountChange{flagged("7001", "+1 555 010 9999", "FLAGGED")})
	if err != nil || out.Numbers != 2 || out.Portfolios != 1 {
		t.Fatalf("flagged: %+v, %v", out, err)
	}
	if a, b := quality(); a != "RED" || b != "RED" {
		t.Fatalf("qualities %s, %s", a, b)
	}
	out, err = waba.ApplyChanges(ctx, f.deps, []whatsapp.AccountChange{flagged("7001", "2002", "UNFLAGGED")})
	if err != nil || out.Numbers != 1 {
		t.Fatalf("unflagged: %+v, %v", out, err)
	}
	if a, b := quality(); a != "RED" || b != "YELLOW" {
		t.Fatalf("qualities %s, %s", a, b)
	}
	ps, err := f.cat.Portfolios(ctx, f.co.ID)
	if err != nil || len(ps) != 1 || ps[0].Tier != whatsapp.Tier10K || ps[0].Numbers[0].QualityUpdatedAt == nil {
		t.Fatalf("portfolios %+v, %v", ps, err)
	}

	tpl, err := waba.Submit(ctx, f.deps, f.newTemplate(orderUpdate("order_update")))
	if err != nil {
		t.Fatal(err)
	}
	approve := whatsapp.AccountChange{WABAID: "7001", Field: whatsapp.FieldTemplateStatus, TemplateStatus: &whatsapp.TemplateStatusUpdate{
		Event: "APPROVED", MessageTemplateID: 1 << 40, MessageTemplateName: "order_update", MessageTemplateLanguage: "en_US"}}
	if _, err := strconvID(tpl.ProviderTemplateID, &approve.TemplateStatus.MessageTemplateID); err != nil {
		t.Fatal(err)
	}
	unknown := []whatsapp.AccountChange{
		flagged("9999", "2001", "FLAGGED"),
		{WABAID: "7001", Field: whatsapp.FieldTemplateStatus, TemplateStatus: &whatsapp.TemplateStatusUpdate{Event: "APPROVED", MessageTemplateID: 5, MessageTemplateName: "nope", MessageTemplateLanguage: "en_US"}},
		{WABAID: "7001", Field: whatsapp.FieldTemplateStatus, TemplateStatus: &whatsapp.TemplateStatusUpdate{Event: "FLAGGED", MessageTemplateName: "order_update", MessageTemplateLanguage: "en_US"}},
		{WABAID: "9999", Field: whatsapp.FieldTemplateQuality, TemplateQuality: &whatsapp.TemplateQualityUpdate{NewQualityScore: "RED", MessageTemplateName: "order_update", MessageTemplateLanguage: "en_US"}},
	}
	out, err = waba.ApplyChanges(ctx, f.deps, append(unknown, approve, approve))
	if err != nil || out.Ignored != 4 || out.Templates != 1 {
		t.Fatalf("applied %+v, %v", out, err)
	}
	if got := f.template(tpl.ID); got.Status != "APPROVED" || got.Quality != "UNKNOWN" {
		t.Fatalf("template %+v", got.TemplateState)
	}
}
