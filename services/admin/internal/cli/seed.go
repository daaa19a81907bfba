package cli

import (
	"bytes"
	"context"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/pkg/apikey"
	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/services/admin/internal/accounts"
)

// What seed provisions. Changing any of these makes a later seed create a
// second record beside the first, so they stay put.
const (
	demoSlug           = "demo"
	demoCompanyName    = "Demo Company"
	demoAdminEmail     = "admin@demo.example"
	demoMemberEmail    = "member@demo.example"
	demoAccountName    = "Demo WhatsApp number"
	demoTimezone       = "UTC"
	demoTemplateName   = "order_update"
	demoLanguage       = "en_US"
	demoMediaURL       = "https://media.demo.example/order-banner.png"
	demoButtonBase     = "https://shop.demo.example/orders/"
	demoButtonSuffix   = "latest"
	demoCampaignName   = "Demo campaign"
	demoAutomationName = "Order update"
	demoVariable       = "order_id"
	demoConnectorName  = "shopify"

	// seedLock serialises concurrent seeds (pg_advisory_lock key).
	seedLock = 7_270_001
)

// seedView is what seed prints; with --json, exactly this. It is the same on
// every run against the same database and PARLEY_TOKEN_KEY.
type seedView struct {
	CompanyID int64           `json:"company_id"`
	Company   catalog.Company `json:"company"`
	// APIKey is the demo key, or null when an operator has replaced it
	// (APIKeyNote says what to do).
	APIKey              *string           `json:"api_key"`
	APIKeyID            string            `json:"api_key_id"`
	APIKeyNote          *string           `json:"api_key_note"`
	AccountID           int64             `json:"account_id"`
	PhoneNumberID       string            `json:"phone_number_id"`
	TemplateID          int64             `json:"template_id"`
	CampaignID          int64             `json:"campaign_id"`
	AutomationID        int64             `json:"automation_id"`
	AutomationVariables []string          `json:"automation_variables"`
	Connector           catalog.Connector `json:"connector"`
	// Users carry their passwords: this is a local demo, and the passwords
	// are derived from PARLEY_TOKEN_KEY, so each installation has its own.
	Users []seedUser `json:"users"`
	Note  string     `json:"note"`
}

type seedUser struct {
	ID    int64  `json:"id"`
	Email string `json:"email"`
	Role  string `json:"role"`
	// Password is null when someone changed it after seeding.
	Password     *string `json:"password"`
	PasswordNote *string `json:"password_note,omitempty"`
}

const seedNote = "local demo: the API key and passwords above are printed on purpose; do not seed a production installation"

func seedCmd(e *env) *cobra.Command {
	var gatewayURL, consoleURL string
	c := &cobra.Command{
		Use:   "seed",
		Short: "Provision the demo company idempotently and print its key, credentials and ids",
		Long: strings.TrimSpace(`
seed provisions company "demo" (subscription active, provisioned), an admin and
a member console user, a connected messaging account matching provider-sim's
demo account (PARLEY_DEMO_PHONE_NUMBER_ID, PARLEY_DEMO_ACCESS_TOKEN), a template
with an image header, a campaign, an active "api" automation with the trigger
variable order_id, a connected "shopify" connector, and an API key.

Running it again changes nothing and prints the same. The API key and the
passwords are derived from PARLEY_TOKEN_KEY, so they can be printed again
although only their hashes are stored. If an operator rotated or revoked the
demo key, seed says so and prints null for api_key.`),
		Example: `  parleyctl seed
  parleyctl seed --json | jq -r .api_key`,
		Args: noArgs,
		RunE: run(func(ctx context.Context, _ []string) error {
			v, err := e.seed(ctx)
			if err != nil {
				return err
			}
			return e.emit(v, func(w io.Writer) { printSeed(w, v, gatewayURL, consoleURL) })
		}),
	}
	c.Flags().StringVar(&gatewayURL, "gateway-url", "http://127.0.0.1:8080", "the gateway's address, for the curl examples")
	c.Flags().StringVar(&consoleURL, "console-url", "http://127.0.0.1:8081", "the admin console's address")
	return c
}

// derive is keyed by the installation's secret: the demo's key and passwords
// are stable on one installation and unknown elsewhere (unless it runs on the
// public development key, as local machines do).
func derive(tokenKey, label string, n int) ([]byte, error) {
	secret, err := base64.StdEncoding.DecodeString(tokenKey)
	if err != nil {
		return nil, fmt.Errorf("PARLEY_TOKEN_KEY: %w", err)
	}
	b, err := hkdf.Key(sha256.New, secret, nil, "parley seed v1: "+label, n)
	if err != nil {
		return nil, fmt.Errorf("derive %s: %w", label, err)
	}
	return b, nil
}

func demoPassword(tokenKey, email string) (string, error) {
	b, err := derive(tokenKey, "password "+email, 18)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// demoKeyMaterial feeds apikey.GenerateFrom; 4 KiB is far more than its
// rejection sampling ever reads.
func demoKeyMaterial(tokenKey string) (io.Reader, error) {
	b, err := derive(tokenKey, "api key "+demoSlug, 4096)
	if err != nil {
		return nil, err
	}
	return bytes.NewReader(b), nil
}

func (e *env) seed(ctx context.Context) (seedView, error) {
	cat, err := e.catalog(ctx)
	if err != nil {
		return seedView{}, err
	}
	unlock, err := advisoryLock(ctx, e.pool, seedLock)
	if err != nil {
		return seedView{}, err
	}
	defer unlock()

	var v seedView
	var invs []bus.Invalidation
	v.Note = seedNote

	co, err := cat.CompanyBySlug(ctx, demoSlug)
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		co, err = cat.CreateCompany(ctx, catalog.NewCompany{Slug: demoSlug, Name: demoCompanyName, SubscriptionActive: true, Provisioned: true})
		if err != nil {
			return seedView{}, err
		}
	case err != nil:
		return seedView{}, err
	case !co.SubscriptionActive || !co.Provisioned:
		on := true
		if co, err = cat.UpdateCompany(ctx, co.ID, catalog.CompanyUpdate{SubscriptionActive: &on, Provisioned: &on}); err != nil {
			return seedView{}, err
		}
		invs = append(invs, bus.Invalidation{Kind: bus.KindCompany, ID: fmtID(co.ID)})
	}
	v.CompanyID, v.Company = co.ID, co

	for _, u := range []struct {
		email string
		role  accounts.Role
	}{{demoAdminEmail, accounts.RoleAdmin}, {demoMemberEmail, accounts.RoleMember}} {
		su, err := e.seedUser(ctx, co, u.email, u.role)
		if err != nil {
			return seedView{}, err
		}
		v.Users = append(v.Users, su)
	}

	acct, err := e.seedAccount(ctx, cat, co)
	if err != nil {
		return seedView{}, err
	}
	v.AccountID, v.PhoneNumberID = acct.ID, acct.PhoneNumberID

	tpl, err := seedTemplate(ctx, cat, co)
	if err != nil {
		return seedView{}, err
	}
	v.TemplateID = tpl.ID
	if !hasVariableDefault(tpl.Template, demoVariable) {
		// Templates are immutable (they mirror what the provider approved
		// and past messages were rendered from them), so seed does not
		// rewrite one it finds; it says what that means and how to get the
		// current demo.
		e.warnf("the demo template %q (id %d) was made by an older seed: its %s variable has no default, so a campaign to a contact "+
			"without %s fails to render (the message ends failed); send %s in the contacts' variables, or recreate the database "+
			"(parleyctl migrate --create-database on a new PARLEY_POSTGRES_URL, or drop it) and seed again",
			demoTemplateName, tpl.ID, demoVariable, demoVariable, demoVariable)
	}

	camp, err := seedCampaign(ctx, cat, co, tpl.ID, acct.ID)
	if err != nil {
		return seedView{}, err
	}
	v.CampaignID = camp.ID

	auto, changed, err := seedAutomation(ctx, cat, co, tpl.ID, acct.ID)
	if err != nil {
		return seedView{}, err
	}
	if changed {
		invs = append(invs, bus.Invalidation{Kind: bus.KindAutomation, ID: fmtID(auto.ID)})
	}
	v.AutomationID, v.AutomationVariables = auto.ID, auto.TriggerVariables

	conn, changed, err := seedConnector(ctx, cat, co, auto.ID)
	if err != nil {
		return seedView{}, err
	}
	if changed {
		invs = append(invs, bus.Invalidation{Kind: bus.KindConnector, ID: fmtID(conn.ID)})
	}
	v.Connector = conn

	created, err := e.seedKey(ctx, co, &v)
	if err != nil {
		return seedView{}, err
	}
	if created {
		invs = append(invs, keyInvalidation(v.APIKeyID))
	}
	e.invalidate(ctx, invs...)
	return v, nil
}

// advisoryLock holds a session lock on one pooled connection until unlock.
func advisoryLock(ctx context.Context, pool *pgxpool.Pool, key int64) (func(), error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("seed lock: %w", err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		conn.Release()
		return nil, fmt.Errorf("seed lock: %w", err)
	}
	return func() {
		_, _ = conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, key)
		conn.Release()
	}, nil
}

func (e *env) seedUser(ctx context.Context, co catalog.Company, email string, role accounts.Role) (seedUser, error) {
	password, err := demoPassword(e.cfg.Token.Key, email)
	if err != nil {
		return seedUser{}, err
	}
	users := accounts.NewStore(e.pool)
	u, err := users.UserByEmail(ctx, email)
	if errors.Is(err, accounts.ErrNotFound) {
		u, err = users.CreateUser(ctx, co.ID, email, password, role)
		if err != nil {
			return seedUser{}, fmt.Errorf("seed user %s: %w", email, err)
		}
		return seedUser{ID: u.ID, Email: u.Email, Role: string(u.Role), Password: &password}, nil
	}
	if err != nil {
		return seedUser{}, fmt.Errorf("seed user %s: %w", email, err)
	}
	if u.CompanyID != co.ID {
		return seedUser{}, fmt.Errorf("user %s exists in another company (%d); seed will not move it", email, u.CompanyID)
	}
	su := seedUser{ID: u.ID, Email: u.Email, Role: string(u.Role)}
	// Sign-in itself tells whether the derived password still works.
	_, err = users.Authenticate(ctx, email, password)
	switch {
	case err == nil:
		su.Password = &password
	case errors.Is(err, accounts.ErrInvalidCredentials):
		note := "the password was changed after seeding; it is not shown"
		su.PasswordNote = &note
	default:
		return seedUser{}, fmt.Errorf("seed user %s: check password: %w", email, err)
	}
	return su, nil
}

func (e *env) seedAccount(ctx context.Context, cat *catalog.Store, co catalog.Company) (catalog.MessagingAccount, error) {
	demo := e.cfg.Demo
	as, err := cat.MessagingAccounts(ctx, co.ID)
	if err != nil {
		return catalog.MessagingAccount{}, err
	}
	for _, a := range as {
		if a.PhoneNumberID != demo.PhoneNumberID {
			continue
		}
		if !a.Connected {
			on := true
			if a, err = cat.UpdateMessagingAccount(ctx, a.ID, catalog.AccountUpdate{Connected: &on}); err != nil {
				return catalog.MessagingAccount{}, err
			}
		}
		tok, err := cat.AccessToken(ctx, a.ID)
		if err != nil || tok != demo.AccessToken {
			e.warnf("the demo account's stored access token is not PARLEY_DEMO_ACCESS_TOKEN (or does not open with PARLEY_TOKEN_KEY); provider-sim will refuse its sends")
		}
		return a, nil
	}
	a, err := cat.CreateMessagingAccount(ctx, catalog.NewMessagingAccount{CompanyID: co.ID, Name: demoAccountName,
		PhoneNumberID: demo.PhoneNumberID, AccessToken: demo.AccessToken, Connected: true, Timezone: demoTimezone})
	if errors.Is(err, catalog.ErrConflict) {
		return catalog.MessagingAccount{}, fmt.Errorf("phone number id %s (PARLEY_DEMO_PHONE_NUMBER_ID) belongs to another company", demo.PhoneNumberID)
	}
	return a, err
}

func seedTemplate(ctx context.Context, cat *catalog.Store, co catalog.Company) (catalog.Template, error) {
	ts, err := cat.Templates(ctx, co.ID)
	if err != nil {
		return catalog.Template{}, err
	}
	for _, t := range ts {
		if t.Name == demoTemplateName && t.Language == demoLanguage {
			return t, nil
		}
	}
	return cat.CreateTemplate(ctx, catalog.NewTemplate{CompanyID: co.ID, Template: whatsapp.Template{
		Name:           demoTemplateName,
		Language:       demoLanguage,
		HeaderKind:     whatsapp.HeaderImage,
		HeaderMediaURL: demoMediaURL,
		BodyParameters: []whatsapp.Binding{
			{Source: "first_name", Default: "there"},
			{Source: "variable", Name: demoVariable, Default: "your order"},
		},
		URLButtons: []whatsapp.URLButton{{Base: demoButtonBase, DefaultSuffix: demoButtonSuffix}},
	}})
}

// hasVariableDefault reports whether every body parameter bound to the
// variable name has a default.
func hasVariableDefault(t whatsapp.Template, name string) bool {
	for _, b := range t.BodyParameters {
		if b.Source == "variable" && b.Name == name && b.Default == "" {
			return false
		}
	}
	return true
}

func seedCampaign(ctx context.Context, cat *catalog.Store, co catalog.Company, templateID, accountID int64) (catalog.Campaign, error) {
	cs, err := cat.Campaigns(ctx, co.ID)
	if err != nil {
		return catalog.Campaign{}, err
	}
	for _, c := range cs {
		if c.Name == demoCampaignName {
			return c, nil
		}
	}
	return cat.CreateCampaign(ctx, co.ID, demoCampaignName, templateID, accountID)
}

func seedAutomation(ctx context.Context, cat *catalog.Store, co catalog.Company, templateID, accountID int64) (catalog.Automation, bool, error) {
	as, err := cat.Automations(ctx, co.ID)
	if err != nil {
		return catalog.Automation{}, false, err
	}
	for _, a := range as {
		if a.Name != demoAutomationName {
			continue
		}
		if a.Active {
			return a, false, nil
		}
		if err := cat.SetAutomationActive(ctx, co.ID, a.ID, true); err != nil {
			return catalog.Automation{}, false, err
		}
		a.Active = true
		return a, true, nil
	}
	a, err := cat.CreateAutomation(ctx, catalog.NewAutomation{CompanyID: co.ID, Name: demoAutomationName, Type: catalog.TypeAPI,
		Active: true, TemplateID: &templateID, MessagingAccountID: &accountID, TriggerVariables: []string{demoVariable}})
	return a, false, err
}

func seedConnector(ctx context.Context, cat *catalog.Store, co catalog.Company, automationID int64) (catalog.Connector, bool, error) {
	c, err := cat.Connector(ctx, co.ID, demoConnectorName)
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		c, err = cat.CreateConnector(ctx, catalog.NewConnector{CompanyID: co.ID, Name: demoConnectorName, Connected: true, TargetAutomationID: &automationID})
		return c, false, err
	case err != nil:
		return catalog.Connector{}, false, err
	case c.Connected:
		return c, false, nil
	}
	if err := cat.SetConnectorConnected(ctx, co.ID, demoConnectorName, true); err != nil {
		return catalog.Connector{}, false, err
	}
	c.Connected = true
	return c, true, nil
}

// seedKey installs the derived demo key when the company has no active key,
// and shows it only while it is still the active key. It reports whether it
// created the key.
func (e *env) seedKey(ctx context.Context, co catalog.Company, v *seedView) (bool, error) {
	material, err := demoKeyMaterial(e.cfg.Token.Key)
	if err != nil {
		return false, err
	}
	full, p, err := apikey.GenerateFrom(material)
	if err != nil {
		return false, fmt.Errorf("derive the demo key: %w", err)
	}
	v.APIKeyID = p.KeyID
	note := func(format string, args ...any) {
		s := fmt.Sprintf(format, args...)
		v.APIKeyNote = &s
	}
	ks, err := e.keys(ctx)
	if err != nil {
		return false, err
	}
	k, err := ks.Lookup(ctx, p.KeyID)
	switch {
	case err == nil && k.CompanyID != co.ID:
		return false, fmt.Errorf("the demo key id %s belongs to company %d", p.KeyID, k.CompanyID)
	case err == nil && k.State == apikey.StateActive:
		v.APIKey = &full
		return false, nil
	case err == nil && k.State == apikey.StateRotated:
		note("an operator rotated the demo key on %s; use the key `parleyctl keys rotate` printed then, or rotate again: parleyctl keys rotate --company %s", fmtTimePtr(k.RotatedAt), co.Slug)
		return false, nil
	case err == nil:
		note("an operator revoked the demo key on %s; create a new one: parleyctl keys create --company %s", fmtTimePtr(k.RevokedAt), co.Slug)
		return false, nil
	case !errors.Is(err, apikey.ErrNotFound):
		return false, err
	}
	material, err = demoKeyMaterial(e.cfg.Token.Key)
	if err != nil {
		return false, err
	}
	created, _, err := ks.CreateFrom(ctx, co.ID, material, operator)
	if errors.Is(err, apikey.ErrActiveKeyExists) {
		note("company %q already has an active API key that seed did not make; use it, or replace it: parleyctl keys rotate --company %s", co.Slug, co.Slug)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	v.APIKey = &created
	return true, nil
}

func printSeed(w io.Writer, v seedView, gatewayURL, consoleURL string) {
	gatewayURL = strings.TrimRight(gatewayURL, "/")
	fmt.Fprintf(w, "Demo company %q (id %d): subscription active, provisioned\n\n", v.Company.Slug, v.CompanyID)
	key := "<your API key>"
	if v.APIKey != nil {
		key = *v.APIKey
		fmt.Fprintf(w, "  API key (header service-api-key): %s\n", key)
	} else {
		fmt.Fprintf(w, "  API key: not shown: %s\n", *v.APIKeyNote)
	}
	fmt.Fprintf(w, "\n  Console %s, local demo credentials:\n", consoleURL)
	for _, u := range v.Users {
		pw := "(changed after seeding; not shown)"
		if u.Password != nil {
			pw = *u.Password
		}
		fmt.Fprintf(w, "    %-6s  %-20s  password %s\n", u.Role, u.Email, pw)
	}
	fmt.Fprintln(w)
	fields(w,
		"  messaging account", fmt.Sprintf("%d (phone number id %s)", v.AccountID, v.PhoneNumberID),
		"  template", fmt.Sprintf("%d (%s)", v.TemplateID, demoTemplateName),
		"  campaign", fmt.Sprintf("%d (%s)", v.CampaignID, demoCampaignName),
		"  automation", fmt.Sprintf("%d (%s; trigger variables: %s)", v.AutomationID, demoAutomationName, strings.Join(v.AutomationVariables, ", ")),
		"  connector", fmt.Sprintf("%s -> automation %d", v.Connector.Name, v.AutomationID),
	)
	fmt.Fprintf(w, `
Send a campaign:
  curl -sS -X POST %[1]s/api/campaigns/send \
    -H 'service-api-key: %[2]s' -H 'Content-Type: application/json' \
    -d '{"campaign_id": %[3]d, "contacts": ["+15551230001", "+15551230002"]}'

Trigger the automation:
  curl -sS -X POST %[1]s/api/automations/send \
    -H 'service-api-key: %[2]s' -H 'Content-Type: application/json' \
    -d '{"automation_id": %[4]d, "contacts": [{"phone": "+15551230001", "first_name": "Ada", "variables": {"%[5]s": "A-1001"}}]}'

(%[6]s)
`, gatewayURL, key, v.CampaignID, v.AutomationID, demoVariable, v.Note)
}
