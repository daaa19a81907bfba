package catalog_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/testkit/storetest"
)

func newStore(t *testing.T) *catalog.Store {
	t.Helper()
	_, pool := storetest.NewDatabase(t)
	box, err := secretbox.New(secretbox.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	return catalog.NewStore(pool, box)
}

func TestCatalogIsScopedByCompany(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	acme, err := s.CreateCompany(ctx, catalog.NewCompany{Slug: "acme", Name: "Acme", SubscriptionActive: true, Provisioned: true})
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.CreateCompany(ctx, catalog.NewCompany{Slug: "other", Name: "Other"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateCompany(ctx, catalog.NewCompany{Slug: "acme", Name: "Again"}); !errors.Is(err, catalog.ErrConflict) {
		t.Fatalf("duplicate slug: %v", err)
	}
	if acme.MaxSegments != 100 || !acme.SubscriptionActive || other.SubscriptionActive {
		t.Fatalf("companies = %+v, %+v", acme, other)
	}

	acct, err := s.CreateMessagingAccount(ctx, catalog.NewMessagingAccount{
		CompanyID: acme.ID, Name: "Main", PhoneNumberID: "1000001", AccessToken: "tok-secret", Connected: true,
		Timezone: "Europe/Rome", Window: &catalog.DeliveryWindow{Start: 9 * time.Hour, End: 20*time.Hour + 30*time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	if acct.ThroughputPerSecond != 80 || acct.Window == nil || acct.Window.End != 20*time.Hour+30*time.Minute {
		t.Fatalf("account = %+v", acct)
	}
	tok, err := s.AccessToken(ctx, acct.ID)
	if err != nil || tok != "tok-secret" {
		t.Fatalf("token = %q, %v", tok, err)
	}
	if _, err := s.CreateMessagingAccount(ctx, catalog.NewMessagingAccount{CompanyID: acme.ID, Name: "x", PhoneNumberID: "1000002", Timezone: "Mars/Base"}); !errors.Is(err, catalog.ErrInvalid) {
		t.Fatalf("bad timezone: %v", err)
	}

	tpl, err := s.CreateTemplate(ctx, catalog.NewTemplate{CompanyID: acme.ID, Template: whatsapp.Template{
		Name: "order_update", Language: "it", HeaderKind: whatsapp.HeaderImage, HeaderMediaURL: "https://cdn.example/a.png",
		BodyParameters: []whatsapp.Binding{{Source: "first_name", Default: "there"}, {Source: "variable", Name: "order"}},
		URLButtons:     []whatsapp.URLButton{{Base: "https://shop.example/o/", DefaultSuffix: "home"}, {Base: "https://shop.example/t/"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Template(ctx, tpl.ID)
	if err != nil || len(got.BodyParameters) != 2 || got.BodyParameters[1].Name != "order" || len(got.URLButtons) != 2 || got.URLButtons[0].DefaultSuffix != "home" {
		t.Fatalf("template = %+v, %v", got, err)
	}
	if _, err := s.CreateTemplate(ctx, catalog.NewTemplate{CompanyID: acme.ID, Template: whatsapp.Template{
		Name: "bad", BodyParameters: []whatsapp.Binding{{Source: "variable"}}}}); !errors.Is(err, catalog.ErrInvalid) {
		t.Fatalf("variable binding without name: %v", err)
	}

	camp, err := s.CreateCampaign(ctx, acme.ID, "Black Friday", tpl.ID, acct.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateCampaign(ctx, other.ID, "Stolen", tpl.ID, acct.ID); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("campaign on another company's template: %v", err)
	}
	if _, err := s.Campaign(ctx, other.ID, camp.ID); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("another company's campaign: %v", err)
	}
	if c, err := s.Campaign(ctx, acme.ID, camp.ID); err != nil || c.TemplateID != tpl.ID {
		t.Fatalf("campaign = %+v, %v", c, err)
	}

	au, err := s.CreateAutomation(ctx, catalog.NewAutomation{CompanyID: acme.ID, Name: "Welcome", Active: true,
		TemplateID: &tpl.ID, MessagingAccountID: &acct.ID, TriggerVariables: []string{"order"}})
	if err != nil {
		t.Fatal(err)
	}
	if au.Type != catalog.TypeAPI || !au.AccountConnected || len(au.TriggerVariables) != 1 {
		t.Fatalf("automation = %+v", au)
	}
	bare, err := s.CreateAutomation(ctx, catalog.NewAutomation{CompanyID: acme.ID, Name: "Misconfigured"})
	if err != nil {
		t.Fatal(err)
	}
	if bare.Active || bare.TemplateID != nil || bare.AccountConnected || bare.TriggerVariables == nil {
		t.Fatalf("bare automation = %+v", bare)
	}
	if err := s.SetAutomationActive(ctx, other.ID, au.ID, false); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("deactivate another company's automation: %v", err)
	}
	off := false
	if _, err := s.UpdateMessagingAccount(ctx, acct.ID, catalog.AccountUpdate{Connected: &off, ClearWindow: true}); err != nil {
		t.Fatal(err)
	}
	if au, _ = s.Automation(ctx, acme.ID, au.ID); au.AccountConnected {
		t.Fatal("automation still sees a connected account after disconnecting it")
	}

	if _, err := s.CreateConnector(ctx, catalog.NewConnector{CompanyID: acme.ID, Name: "shopify", Connected: true, TargetAutomationID: &au.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateConnector(ctx, catalog.NewConnector{CompanyID: other.ID, Name: "shopify", TargetAutomationID: &au.ID}); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("connector targeting another company's automation: %v", err)
	}
	if _, err := s.Connector(ctx, other.ID, "shopify"); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("another company's connector: %v", err)
	}
	if err := s.SetConnectorConnected(ctx, acme.ID, "shopify", false); err != nil {
		t.Fatal(err)
	}
	if c, _ := s.Connector(ctx, acme.ID, "shopify"); c.Connected {
		t.Fatal("connector still connected")
	}
}

func TestReservedConnectorNames(t *testing.T) {
	ctx := context.Background()
	_, pool := storetest.NewDatabase(t)
	s := catalog.NewStore(pool, nil)
	co, err := s.CreateCompany(ctx, catalog.NewCompany{Slug: "acme", Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range catalog.ReservedConnectorNames {
		if _, err := s.CreateConnector(ctx, catalog.NewConnector{CompanyID: co.ID, Name: name}); !errors.Is(err, catalog.ErrInvalid) {
			t.Fatalf("connector %q: %v, want ErrInvalid", name, err)
		}
		// The database refuses them too, whoever writes.
		if _, err := pool.Exec(ctx, `INSERT INTO connectors (company_id, name) VALUES ($1, $2)`, co.ID, name); err == nil {
			t.Fatalf("the database took the reserved connector name %q", name)
		}
	}
	if _, err := s.CreateConnector(ctx, catalog.NewConnector{CompanyID: co.ID, Name: "campaigns-sync"}); err != nil {
		t.Fatalf("a name that only starts with a reserved one: %v", err)
	}
}
