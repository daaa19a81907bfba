package cli

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alexedwards/argon2id"

	"github.com/parleyhq/parley/pkg/apikey"
	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

// rowCounts counts the rows of every table of the schema.
func (s *stack) rowCounts() map[string]int {
	s.t.Helper()
	ctx := context.Background()
	rows, err := s.pool.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`)
	if err != nil {
		s.t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			s.t.Fatal(err)
		}
		tables = append(tables, name)
	}
	if len(tables) < 10 {
		s.t.Fatalf("found only tables %v", tables)
	}
	counts := map[string]int{}
	for _, tbl := range tables {
		counts[tbl] = s.count(tbl)
	}
	return counts
}

func TestSeedIsIdempotent(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	first := s.ok("seed", "--json")
	afterFirst := s.rowCounts()
	second := s.ok("seed", "--json")
	if first.stdout != second.stdout {
		t.Fatalf("seed printed different JSON on its second run:\n%s\n---\n%s", first.stdout, second.stdout)
	}
	if after := s.rowCounts(); !mapsEqual(after, afterFirst) {
		t.Fatalf("the second seed changed row counts: %v -> %v", afterFirst, after)
	}
	for tbl, want := range map[string]int{"companies": 1, "users": 2, "messaging_accounts": 1, "templates": 1, "campaigns": 1,
		"automations": 1, "connectors": 1, "api_keys": 1, "api_key_events": 1} {
		if afterFirst[tbl] != want {
			t.Errorf("%s has %d rows, want %d", tbl, afterFirst[tbl], want)
		}
	}

	var v seedView
	decodeJSON(t, first.stdout, &v)
	if v.APIKey == nil || v.APIKeyNote != nil {
		t.Fatalf("api_key = %v, note %v", v.APIKey, v.APIKeyNote)
	}
	p, err := apikey.Parse(*v.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	k, err := apikey.NewStore(s.pool, nil).Lookup(ctx, p.KeyID)
	if err != nil || k.State != apikey.StateActive || k.CompanyID != v.CompanyID || !apikey.SecretMatches(p.Secret, k.SecretHash) || v.APIKeyID != p.KeyID {
		t.Fatalf("the printed key does not authenticate company %d: %+v, %v", v.CompanyID, k, err)
	}
	s.waitInvalidations(keyInvalidation(p.KeyID))

	if !v.Company.SubscriptionActive || !v.Company.Provisioned || v.Company.Slug != "demo" {
		t.Fatalf("company %+v", v.Company)
	}
	if len(v.Users) != 2 || v.Users[0].Role != "admin" || v.Users[1].Role != "member" {
		t.Fatalf("users %+v", v.Users)
	}
	for _, u := range v.Users {
		var hash string
		err := s.pool.QueryRow(ctx, `SELECT password_hash FROM users WHERE email = $1`, u.Email).Scan(&hash)
		if err != nil || u.Password == nil {
			t.Fatalf("user %s: %v", u.Email, err)
		}
		if ok, err := argon2id.ComparePasswordAndHash(*u.Password, hash); err != nil || !ok {
			t.Fatalf("the printed password of %s does not verify (%v)", u.Email, err)
		}
	}

	cat := catalog.NewStore(s.pool, mustBox(t))
	acct, err := cat.MessagingAccount(ctx, v.AccountID)
	if err != nil || !acct.Connected || acct.PhoneNumberID != "15550100001" || v.PhoneNumberID != acct.PhoneNumberID {
		t.Fatalf("account %+v, %v", acct, err)
	}
	if tok, err := cat.AccessToken(ctx, v.AccountID); err != nil || tok != "parley-demo-access-token" {
		t.Fatalf("account token %q, %v; want provider-sim's demo token", tok, err)
	}
	tpl, err := cat.Template(ctx, v.TemplateID)
	if err != nil {
		t.Fatal(err)
	}
	wantBody := []whatsapp.Binding{{Source: "first_name", Default: "there"}, {Source: "variable", Name: "order_id", Default: "your order"}}
	if tpl.HeaderKind != whatsapp.HeaderImage || tpl.HeaderMediaURL == "" || !slices.Equal(tpl.BodyParameters, wantBody) || len(tpl.URLButtons) != 1 {
		t.Fatalf("template %+v", tpl)
	}
	camp, err := cat.Campaign(ctx, v.CompanyID, v.CampaignID)
	if err != nil || camp.TemplateID != tpl.ID || camp.MessagingAccountID != acct.ID {
		t.Fatalf("campaign %+v, %v", camp, err)
	}
	auto, err := cat.Automation(ctx, v.CompanyID, v.AutomationID)
	if err != nil || !auto.Active || auto.Type != catalog.TypeAPI || !slices.Equal(auto.TriggerVariables, []string{"order_id"}) ||
		*auto.TemplateID != tpl.ID || !auto.AccountConnected || !slices.Equal(v.AutomationVariables, auto.TriggerVariables) {
		t.Fatalf("automation %+v, %v", auto, err)
	}
	if v.Connector.Name != "shopify" || !v.Connector.Connected || *v.Connector.TargetAutomationID != auto.ID {
		t.Fatalf("connector %+v", v.Connector)
	}

	human := s.ok("seed", "--gateway-url", "http://127.0.0.1:18080/").stdout
	for _, want := range []string{
		"API key (header service-api-key): " + *v.APIKey,
		"curl -sS -X POST http://127.0.0.1:18080/api/campaigns/send",
		"curl -sS -X POST http://127.0.0.1:18080/api/automations/send",
		fmt.Sprintf(`"automation_id": %d`, v.AutomationID),
		fmt.Sprintf(`"campaign_id": %d`, v.CampaignID),
		"admin@demo.example", *v.Users[0].Password,
	} {
		if !strings.Contains(human, want) {
			t.Errorf("human output lacks %q:\n%s", want, human)
		}
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestSeedRespectsARotatedKey(t *testing.T) {
	s := newStack(t)
	var v seedView
	s.jsonOK(&v, "seed")
	s.ok("keys", "rotate", "--company", "demo")
	r := s.ok("seed", "--json")
	var after seedView
	decodeJSON(t, r.stdout, &after)
	if after.APIKey != nil || after.APIKeyNote == nil || !strings.Contains(*after.APIKeyNote, "rotated") || after.APIKeyID != v.APIKeyID {
		t.Fatalf("after a rotation: api_key %v, note %v", after.APIKey, after.APIKeyNote)
	}
	if n := s.count("api_keys"); n != 2 {
		t.Fatalf("%d keys, want the rotated demo key and the operator's", n)
	}
	if human := s.ok("seed").stdout; !strings.Contains(human, "not shown") || !strings.Contains(human, "<your API key>") {
		t.Fatalf("human output after a rotation:\n%s", human)
	}

	// Revoking the demo key (still in its grace) is reported as such.
	s.ok("keys", "revoke", v.APIKeyID)
	decodeJSON(t, s.ok("seed", "--json").stdout, &after)
	if after.APIKey != nil || !strings.Contains(*after.APIKeyNote, "revoked") {
		t.Fatalf("after a revoke: api_key %v, note %v", after.APIKey, *after.APIKeyNote)
	}
}

func TestSeedConvergesAndNeverShowsWhatItDidNotMake(t *testing.T) {
	s := newStack(t)
	var v seedView
	s.jsonOK(&v, "seed")
	s.ok("companies", "update", "demo", "--subscription-active=false")
	s.ok("automations", "update", fmt.Sprint(v.AutomationID), "--company", "demo", "--active=false")
	s.ok("connectors", "update", "shopify", "--company", "demo", "--connected=false")
	before := len(s.invalidations())

	var again seedView
	s.jsonOK(&again, "seed")
	if !again.Company.SubscriptionActive {
		t.Fatal("seed left the demo company without a subscription")
	}
	if !again.Connector.Connected {
		t.Fatal("seed left the demo connector disconnected")
	}
	s.waitInvalidations(
		bus.Invalidation{Kind: bus.KindCompany, ID: fmt.Sprint(v.CompanyID)},
		bus.Invalidation{Kind: bus.KindAutomation, ID: fmt.Sprint(v.AutomationID)},
		bus.Invalidation{Kind: bus.KindConnector, ID: fmt.Sprint(v.Connector.ID)},
	)
	// The updates above published the same three; seed's own arrive after
	// them, in their own time.
	for deadline := time.Now().Add(5 * time.Second); len(s.invalidations()) <= before; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no invalidation published for what seed switched back on")
		}
	}

	// Another installation secret derives another key and other passwords:
	// seed must not claim the stored ones.
	other := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))
	r := runCLI(t, append(slices.Clone(s.environ), "PARLEY_TOKEN_KEY="+other), "", "seed", "--json")
	if r.code != 0 {
		t.Fatalf("seed with another key: %d %s", r.code, r.stderr)
	}
	var foreign seedView
	decodeJSON(t, r.stdout, &foreign)
	if foreign.APIKey != nil || foreign.APIKeyNote == nil || !strings.Contains(*foreign.APIKeyNote, "did not make") {
		t.Fatalf("api_key %v, note %v", foreign.APIKey, foreign.APIKeyNote)
	}
	for _, u := range foreign.Users {
		if u.Password != nil || u.PasswordNote == nil {
			t.Fatalf("user %+v: a password seed did not set must not be shown", u)
		}
	}
	if !strings.Contains(r.stderr, "access token") {
		t.Fatalf("stderr %q: want a warning that the demo account's token does not match", r.stderr)
	}
}

// TestSeedWarnsOfAnOldDemoTemplate: a database seeded before the demo
// template's order_id variable had a default keeps its template (templates
// are not rewritten); seed says what that means and how to get the current
// one, and a fresh seed says nothing.
func TestSeedWarnsOfAnOldDemoTemplate(t *testing.T) {
	s := newStack(t)
	var v seedView
	s.jsonOK(&v, "seed")
	if r := s.ok("seed"); strings.Contains(r.stderr, "older seed") {
		t.Fatalf("a current demo template was warned about: %q", r.stderr)
	}
	// What the seed before the default made.
	if _, err := s.pool.Exec(context.Background(), `UPDATE templates SET body_parameters = $1::jsonb WHERE id = $2`,
		`[{"source":"first_name","default":"there"},{"source":"variable","name":"order_id"}]`, v.TemplateID); err != nil {
		t.Fatal(err)
	}
	r := s.ok("seed")
	if !strings.Contains(r.stderr, fmt.Sprintf(`warning: the demo template "order_update" (id %d) was made by an older seed: its order_id variable has no default`, v.TemplateID)) ||
		!strings.Contains(r.stderr, "recreate the database") {
		t.Fatalf("stderr %q: want the old template named, with the way out", r.stderr)
	}
	var again seedView
	s.jsonOK(&again, "seed")
	if again.TemplateID != v.TemplateID {
		t.Fatalf("seed replaced the template (%d -> %d)", v.TemplateID, again.TemplateID)
	}
}
