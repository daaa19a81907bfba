package catalog_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

func TestTemplatesAndNumbersAsTheProviderKnowsThem(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	acme, err := s.CreateCompany(ctx, catalog.NewCompany{Slug: "acme", Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.CreateCompany(ctx, catalog.NewCompany{Slug: "other", Name: "Other"})
	if err != nil {
		t.Fatal(err)
	}
	mk := func(co int64, name, pnid, waba, portfolio string) catalog.MessagingAccount {
		t.Helper()
		a, err := s.CreateMessagingAccount(ctx, catalog.NewMessagingAccount{CompanyID: co, Name: name, PhoneNumberID: pnid,
			AccessToken: "tok", Connected: true, WABAID: waba, PortfolioID: portfolio})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	main := mk(acme.ID, "Main line", "2001", "7001", "")
	second := mk(acme.ID, "Support", "2002", "7001", "")
	alone := mk(acme.ID, "Alone", "2003", "", "")
	theirs := mk(other.ID, "Theirs", "2004", "7001", "")
	if main.QualityRating != "UNKNOWN" || main.WABA() != "7001" || main.Portfolio() != "7001" || alone.WABA() != "2003" || alone.Portfolio() != "2003" {
		t.Fatalf("accounts %+v, %+v", main, alone)
	}

	// A submitted template starts PENDING with its definition and its
	// account, and its history says so; one registered by hand is APPROVED.
	def := []byte(`{"name":"promo","language":"en_US","category":"MARKETING","components":[{"type":"BODY","text":"Hi {{1}}"}]}`)
	sub, err := s.CreateTemplate(ctx, catalog.NewTemplate{CompanyID: acme.ID, Category: "UTILITY",
		Template:   whatsapp.Template{Name: "promo", BodyParameters: []whatsapp.Binding{{Source: "first_name"}}},
		Submission: &catalog.Submission{MessagingAccountID: second.ID, Definition: def}})
	if err != nil {
		t.Fatal(err)
	}
	if sub.Status != "PENDING" || sub.Category != "UTILITY" || sub.Quality != "UNKNOWN" || sub.MessagingAccountID == nil ||
		*sub.MessagingAccountID != second.ID || len(sub.Definition) == 0 {
		t.Fatalf("submitted %+v", sub.TemplateState)
	}
	hist, err := s.TemplateHistory(ctx, acme.ID, sub.ID)
	if err != nil || len(hist) != 1 || hist[0].Status != "PENDING" || hist[0].Source != "submit" {
		t.Fatalf("history %+v, %v", hist, err)
	}
	byHand, err := s.CreateTemplate(ctx, catalog.NewTemplate{CompanyID: acme.ID, Template: whatsapp.Template{Name: "hello"}})
	if err != nil || byHand.Status != "APPROVED" || byHand.Category != "MARKETING" || byHand.MessagingAccountID != nil {
		t.Fatalf("by hand %+v, %v", byHand.TemplateState, err)
	}
	if _, err := s.CreateTemplate(ctx, catalog.NewTemplate{CompanyID: other.ID, Template: whatsapp.Template{Name: "x"},
		Submission: &catalog.Submission{MessagingAccountID: main.ID, Definition: def}}); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("submission through another company's number: %v", err)
	}
	if _, err := s.CompanyTemplate(ctx, other.ID, sub.ID); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("another company's template: %v", err)
	}
	if err := s.SetProviderTemplateID(ctx, acme.ID, sub.ID, "99"); err != nil {
		t.Fatal(err)
	}
	if changed, err := s.SetTemplateQuality(ctx, sub.ID, "RED"); err != nil || !changed {
		t.Fatalf("quality: %v, %v", changed, err)
	}
	if changed, err := s.SetTemplateQuality(ctx, sub.ID, "RED"); err != nil || changed {
		t.Fatalf("same quality again: %v, %v", changed, err)
	}
	if _, err := s.SetTemplateCategory(ctx, sub.ID, "GOSSIP"); !errors.Is(err, catalog.ErrInvalid) {
		t.Fatalf("bad category: %v", err)
	}
	got, err := s.CompanyTemplate(ctx, acme.ID, sub.ID)
	if err != nil || got.ProviderTemplateID != "99" || got.Quality != "RED" {
		t.Fatalf("template %+v, %v", got.TemplateState, err)
	}

	// The WABA's templates: every company's with a number in it; the WABA's numbers.
	tpls, err := s.WABATemplates(ctx, "7001")
	if err != nil || len(tpls) != 2 {
		t.Fatalf("WABA templates %d, %v", len(tpls), err)
	}
	if tpls, err := s.WABATemplates(ctx, "2003"); err != nil || len(tpls) != 1 || tpls[0].ID != byHand.ID {
		t.Fatalf("the lone number's WABA sees %+v, %v", tpls, err)
	}
	nums, err := s.WABAAccounts(ctx, "7001")
	if err != nil || len(nums) != 3 || nums[2].ID != theirs.ID {
		t.Fatalf("WABA numbers %+v, %v", nums, err)
	}
	wabas, err := s.WABAs(ctx)
	if err != nil || len(wabas) != 2 || wabas[0].ID != alone.ID || wabas[1].ID != main.ID {
		t.Fatalf("WABAs %+v, %v", wabas, err)
	}

	// Portfolios: unlimited until told; the operator's or the provider's word.
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if n, err := s.SetAccountQuality(ctx, []int64{main.ID, second.ID}, "RED", at); err != nil || n != 2 {
		t.Fatalf("quality of numbers: %d, %v", n, err)
	}
	if err := s.SetPortfolioTier(ctx, acme.ID, "7001", whatsapp.Tier2K, catalog.TierFromOperator); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPortfolioTier(ctx, acme.ID, "7001", "TIER_3K", catalog.TierFromOperator); !errors.Is(err, catalog.ErrInvalid) {
		t.Fatalf("bad tier: %v", err)
	}
	if err := s.SetPortfolioTier(ctx, other.ID, "2003", whatsapp.Tier250, catalog.TierFromOperator); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("another company's portfolio: %v", err)
	}
	ps, err := s.Portfolios(ctx, acme.ID)
	if err != nil || len(ps) != 2 {
		t.Fatalf("portfolios %+v, %v", ps, err)
	}
	p, lone := ps[0], ps[1]
	if p.ID != "7001" || p.Tier != whatsapp.Tier2K || p.Limit != 2000 || p.Source != "operator" || len(p.Numbers) != 2 ||
		p.Numbers[0].QualityRating != "RED" || p.Numbers[0].QualityUpdatedAt == nil || !p.Numbers[0].QualityUpdatedAt.Equal(at) {
		t.Fatalf("portfolio %+v", p)
	}
	if lone.ID != "2003" || lone.Tier != whatsapp.TierUnlimited || lone.Limit != 0 || lone.Source != "" || len(lone.Numbers) != 1 {
		t.Fatalf("lone portfolio %+v", lone)
	}
	if err := s.DeleteTemplate(ctx, other.ID, sub.ID); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("delete another company's template: %v", err)
	}
	if err := s.DeleteTemplate(ctx, acme.ID, sub.ID); err != nil {
		t.Fatal(err)
	}
}
