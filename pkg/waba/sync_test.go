package waba_test

import (
	"context"
	"strings"
	"testing"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
	"github.com/parleyhq/parley/pkg/waba"
)

// With no webhook reaching Parley, the full sync brings every difference
// in: reviews, a rejection's reason, a pause, quality, category, a template
// registered by hand (found by name); a second sync changes nothing; a WABA
// that cannot be read is skipped and reported, the others synced.
func TestSyncTemplates(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	approved, err := waba.Submit(ctx, f.deps, f.newTemplate(orderUpdate("order_update")))
	if err != nil {
		t.Fatal(err)
	}
	rejected, err := waba.Submit(ctx, f.deps, f.newTemplate(orderUpdate("spam_offer")))
	if err != nil {
		t.Fatal(err)
	}
	legacy, err := f.cat.CreateTemplate(ctx, catalog.NewTemplate{CompanyID: f.co.ID, Template: whatsapp.Template{Name: "legacy", Language: "en_US"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.sim.SetTemplate(whatsappsim.TemplateSpec{Name: "legacy", Language: "en_US"}); err != nil {
		t.Fatal(err)
	}
	st, _ := f.sim.FindTemplate("7001", "legacy", "en_US")
	must := func(_ whatsappsim.TemplateState, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(f.sim.ReviewTemplate(approved.ProviderTemplateID, "APPROVED", ""))
	must(f.sim.SetTemplateQuality(approved.ProviderTemplateID, "GREEN"))
	must(f.sim.SetTemplateCategory(approved.ProviderTemplateID, "MARKETING"))
	must(f.sim.ReviewTemplate(rejected.ProviderTemplateID, "REJECTED", "SCAM"))
	must(f.sim.PauseTemplate(st.ID))

	// A second WABA whose token the provider does not take.
	if _, err := f.cat.CreateMessagingAccount(ctx, catalog.NewMessagingAccount{CompanyID: f.co.ID, Name: "Stale", PhoneNumberID: "3001",
		AccessToken: "expired", Connected: true, WABAID: "8001"}); err != nil {
		t.Fatal(err)
	}
	if err := f.sim.SetAccount(whatsappsim.Account{PhoneNumberID: "3001", Token: "renewed", WABAID: "8001"}); err != nil {
		t.Fatal(err)
	}

	changed, err := waba.SyncTemplates(ctx, f.deps)
	if changed != 5 || err == nil || !strings.Contains(err.Error(), "WABA 8001") {
		t.Fatalf("changed %d, err %v", changed, err)
	}
	if got := f.template(approved.ID); got.Status != "APPROVED" || got.Quality != "GREEN" || got.Category != "MARKETING" {
		t.Fatalf("approved %+v", got.TemplateState)
	}
	if got := f.template(rejected.ID); got.Status != "REJECTED" || got.StatusReason != "SCAM" {
		t.Fatalf("rejected %+v", got.TemplateState)
	}
	if got := f.template(legacy.ID); got.Status != "PAUSED" || got.ProviderTemplateID != st.ID || got.PauseCount != 1 {
		t.Fatalf("legacy %+v", got.TemplateState)
	}
	hist, err := f.cat.TemplateHistory(ctx, f.co.ID, legacy.ID)
	if err != nil || len(hist) != 1 || hist[0].Source != "sync" {
		t.Fatalf("legacy history %+v, %v", hist, err)
	}

	if err := f.sim.SetAccount(whatsappsim.Account{PhoneNumberID: "3001", Token: "expired", WABAID: "8001"}); err != nil {
		t.Fatal(err)
	}
	if changed, err := waba.SyncTemplates(ctx, f.deps); changed != 0 || err != nil {
		t.Fatalf("second sync: changed %d, err %v", changed, err)
	}
}
