package cli

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/alexedwards/argon2id"
	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/pkg/apikey"
	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/pkg/store"
	"github.com/parleyhq/parley/services/admin/internal/accounts"
	"github.com/parleyhq/parley/testkit/storetest"
)

func TestUsageMistakesExitTwo(t *testing.T) {
	s := newStack(t)
	s.company("acme")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "needs a subcommand"},
		{[]string{"frob"}, `unknown command or argument "frob"`},
		{[]string{"keys"}, "parleyctl keys needs a subcommand"},
		{[]string{"keys", "frob"}, `"frob"`},
		{[]string{"companies", "list", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"companies", "create"}, `required flag(s) "slug" not set`},
		{[]string{"companies", "create", "--slug", "Not A Slug"}, `--slug "Not A Slug"`},
		{[]string{"companies", "create", "--slug", "x", "--max-segments", "many"}, `invalid argument "many"`},
		{[]string{"companies", "update", "acme"}, "nothing to update"},
		{[]string{"companies", "get"}, "takes one company id or slug"},
		{[]string{"keys", "create"}, `required flag(s) "company" not set`},
		{[]string{"keys", "revoke"}, "takes one key id"},
		{[]string{"users", "create", "--company", "acme", "--email", "nope", "--password", "long-enough-password"}, `--email "nope"`},
		{[]string{"users", "create", "--company", "acme", "--email", "a@b.example", "--role", "owner", "--password", "long-enough-password"}, `--role "owner"`},
		{[]string{"users", "create", "--company", "acme", "--email", "a@b.example", "--password", "short"}, "at least"},
		{[]string{"accounts", "create", "--company", "acme", "--phone-number-id", "12ab"}, "digits only"},
		{[]string{"accounts", "create", "--company", "acme", "--phone-number-id", "123", "--access-token", "t", "--delivery-window", "9-17"}, "HH:MM"},
		{[]string{"accounts", "create", "--company", "acme", "--phone-number-id", "123", "--access-token", "t", "--timezone", "Mars/Base"}, "IANA"},
		{[]string{"accounts", "create", "--company", "acme", "--phone-number-id", "123"}, "no access token"},
		{[]string{"templates", "create", "--company", "acme", "--name", "t1", "--header", "gif"}, `--header "gif"`},
		{[]string{"templates", "create", "--company", "acme", "--name", "t1", "--header", "text"}, "needs --header-text"},
		{[]string{"templates", "create", "--company", "acme", "--name", "t1", "--body", "nickname"}, `body parameter "nickname"`},
		{[]string{"templates", "create", "--company", "acme", "--name", "t1", "--url-button-2", "https://x.example/"}, "--url-button-1 is needed"},
		{[]string{"templates", "create", "--company", "acme", "--name", "t1", "--url-button-1", "ftp://x"}, "not an http(s) URL"},
		{[]string{"automations", "create", "--company", "acme", "--name", "A", "--type", "cron"}, `--type "cron"`},
		{[]string{"automations", "update", "x1", "--company", "acme", "--active"}, `automation id "x1"`},
		{[]string{"automations", "update", "1", "--company", "acme"}, "nothing to update"},
		{[]string{"connectors", "create", "--company", "acme", "--name", "Shop Ify"}, `--name "Shop Ify"`},
		{[]string{"connectors", "create", "--company", "acme", "--name", "s", "--automation", "1", "--campaign", "1"}, "not both"},
		{[]string{"connectors", "create", "--company", "acme", "--name", "batch"}, `--name "batch" is reserved`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := s.fails(ExitUsage, tc.want, append(tc.args, "--json")...)
			if !strings.Contains(r.stderr, "--help") {
				t.Errorf("a usage error should point to --help: %q", r.stderr)
			}
		})
	}
}

func TestMigrate(t *testing.T) {
	empty := storetest.NewEmptyDatabase(t)
	environ := []string{"PARLEY_POSTGRES_URL=" + empty}
	latest, err := store.LatestVersion()
	if err != nil {
		t.Fatal(err)
	}
	versions, err := store.Versions()
	if err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, environ, "", "migrate", "--json")
	if r.code != 0 {
		t.Fatalf("migrate: %d %s", r.code, r.stderr)
	}
	var v migrateView
	decodeJSON(t, r.stdout, &v)
	if v.From != 0 || v.To != latest || fmt.Sprint(v.Applied) != fmt.Sprint(versions) || v.DatabaseCreated {
		t.Fatalf("first migrate = %+v, want 0 -> %d applying every migration", v, latest)
	}
	r = runCLI(t, environ, "", "migrate")
	if r.code != 0 || r.stdout != fmt.Sprintf("schema is up to date at version %d\n", latest) {
		t.Fatalf("second migrate: exit %d, %q", r.code, r.stdout)
	}

	// --create-database makes the database of PARLEY_POSTGRES_URL first.
	u, err := url.Parse(storetest.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("parley_test_cli_%d", latest*1000+int64(len(t.Name())))
	u.Path = "/" + name
	dropDatabase(t, name)
	t.Cleanup(func() { dropDatabase(t, name) })
	fresh := []string{"PARLEY_POSTGRES_URL=" + u.String()}
	if r := runCLI(t, fresh, "", "companies", "list"); r.code != ExitFailure || !strings.Contains(r.stderr, "migrate --create-database") {
		t.Fatalf("a missing database: exit %d, %q; want a hint to --create-database", r.code, r.stderr)
	}
	r = runCLI(t, fresh, "", "migrate", "--create-database", "--json")
	if r.code != 0 {
		t.Fatalf("migrate --create-database: %d %s", r.code, r.stderr)
	}
	decodeJSON(t, r.stdout, &v)
	if !v.DatabaseCreated || v.To != latest {
		t.Fatalf("migrate --create-database = %+v", v)
	}
	r = runCLI(t, fresh, "", "migrate", "--create-database", "--json")
	decodeJSON(t, r.stdout, &v)
	if v.DatabaseCreated || len(v.Applied) != 0 {
		t.Fatalf("second migrate --create-database = %+v, want nothing done", v)
	}
}

func dropDatabase(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, storetest.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		t.Fatal(err)
	}
}

func TestCommandsRefuseAnOutdatedSchema(t *testing.T) {
	empty := storetest.NewEmptyDatabase(t)
	r := runCLI(t, []string{"PARLEY_POSTGRES_URL=" + empty}, "", "companies", "list")
	if r.code != ExitFailure || !strings.Contains(r.stderr, "parleyctl migrate") {
		t.Fatalf("exit %d, stderr %q; want a failure pointing to parleyctl migrate", r.code, r.stderr)
	}
}

func TestInvalidConfigurationIsAFailure(t *testing.T) {
	r := runCLI(t, []string{"PARLEY_TOKEN_KEY=short", "PARLEY_NATS_STREAM=a b"}, "", "companies", "list")
	if r.code != ExitFailure || !strings.Contains(r.stderr, "PARLEY_TOKEN_KEY") || !strings.Contains(r.stderr, "PARLEY_NATS_STREAM") {
		t.Fatalf("exit %d, stderr %q; want every configuration problem listed", r.code, r.stderr)
	}
}

func TestCompanies(t *testing.T) {
	s := newStack(t)
	var c catalog.Company
	s.jsonOK(&c, "companies", "create", "--slug", "acme", "--name", "Acme Inc.", "--subscription-active", "--max-segments", "7")
	if c.Slug != "acme" || c.Name != "Acme Inc." || !c.SubscriptionActive || c.Provisioned || c.MaxSegments != 7 {
		t.Fatalf("created %+v", c)
	}
	s.fails(ExitFailure, `company "acme" already exists`, "companies", "create", "--slug", "acme")
	human := s.ok("companies", "create", "--slug", "globex")
	if !strings.Contains(human.stdout, "slug:") || !strings.Contains(human.stdout, "globex") {
		t.Fatalf("human output: %q", human.stdout)
	}

	var list []catalog.Company
	s.jsonOK(&list, "companies", "list")
	if len(list) != 2 || list[0].Slug != "acme" || list[1].Slug != "globex" || list[1].Name != "globex" || list[1].MaxSegments != 100 {
		t.Fatalf("list = %+v", list)
	}
	table := s.ok("companies", "list").stdout
	if lines := strings.Split(strings.TrimSpace(table), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") {
		t.Fatalf("table = %q", table)
	}

	var got catalog.Company
	s.jsonOK(&got, "companies", "get", fmt.Sprint(c.ID))
	if got.ID != c.ID || got.Slug != "acme" {
		t.Fatalf("get by id = %+v", got)
	}
	s.jsonOK(&got, "companies", "get", "acme")
	if got.ID != c.ID {
		t.Fatalf("get by slug = %+v", got)
	}
	s.fails(ExitFailure, `company "nope" not found`, "companies", "get", "nope")
	s.fails(ExitFailure, `company "9999" not found`, "companies", "get", "9999")

	var up catalog.Company
	s.jsonOK(&up, "companies", "update", "acme", "--subscription-active=false", "--provisioned", "--max-segments", "0")
	if up.SubscriptionActive || !up.Provisioned || up.MaxSegments != 0 || up.Name != "Acme Inc." {
		t.Fatalf("updated %+v", up)
	}
	s.waitInvalidations(bus.Invalidation{Kind: bus.KindCompany, ID: fmt.Sprint(c.ID)})
	s.fails(ExitFailure, `company "nope" not found`, "companies", "update", "nope", "--provisioned")
}

func TestChangesStandWhenNATSIsDown(t *testing.T) {
	s := newStack(t)
	id := s.company("acme")
	s.nats.Stop()
	r := s.ok("companies", "update", "acme", "--subscription-active", "--json")
	if !strings.Contains(r.stderr, "warning") || !strings.Contains(r.stderr, "cache TTL") {
		t.Fatalf("stderr = %q; want a warning about the cache TTL", r.stderr)
	}
	var c catalog.Company
	decodeJSON(t, r.stdout, &c)
	var active bool
	if err := s.pool.QueryRow(context.Background(), `SELECT subscription_active FROM companies WHERE id = $1`, id).Scan(&active); err != nil || !active {
		t.Fatalf("subscription_active = %v (%v); the change must stand", active, err)
	}
	r = s.ok("keys", "create", "--company", "acme", "--json")
	if !strings.Contains(r.stderr, "cache TTL") {
		t.Fatalf("keys create stderr = %q; want the warning", r.stderr)
	}
	if n := s.count("api_keys"); n != 1 {
		t.Fatalf("%d keys stored, want 1", n)
	}
}

func TestUsers(t *testing.T) {
	s := newStack(t)
	s.company("acme")
	var u accounts.User
	s.jsonOK(&u, "users", "create", "--company", "acme", "--email", "Ops@Acme.example", "--role", "admin", "--password", "correct horse battery")
	if u.Email != "Ops@Acme.example" || u.Role != "admin" || u.ID == 0 {
		t.Fatalf("created %+v", u)
	}
	r := s.run("a member's password\n", "users", "create", "--company", "acme", "--email", "dev@acme.example", "--password-stdin", "--json")
	if r.code != 0 {
		t.Fatalf("create with stdin: %d %s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, "a member's password") {
		t.Fatal("the password was echoed")
	}
	var hash string
	if err := s.pool.QueryRow(context.Background(), `SELECT password_hash FROM users WHERE email = 'dev@acme.example'`).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	if ok, err := argon2id.ComparePasswordAndHash("a member's password", hash); err != nil || !ok || !strings.HasPrefix(hash, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("stored hash %q does not verify the password read from stdin with the console's parameters (%v)", hash, err)
	}
	s.fails(ExitFailure, `user "ops@acme.example" already exists`, "users", "create", "--company", "acme", "--email", "ops@acme.example", "--password", "another long password")
	s.failsWithInput("short\n", ExitUsage, "at least", "users", "create", "--company", "acme", "--email", "x@acme.example")
	s.fails(ExitFailure, `company "nope" not found`, "users", "create", "--company", "nope", "--email", "x@acme.example", "--password", "long enough password")

	var list []accounts.User
	s.jsonOK(&list, "users", "list", "--company", "acme")
	if len(list) != 2 || list[0].Role != "admin" || list[1].Role != "member" {
		t.Fatalf("list = %+v", list)
	}
	if out := s.ok("users", "list", "--company", "acme").stdout; strings.Contains(out, "argon2id") {
		t.Fatal("users list shows a password hash")
	}
}

func TestKeys(t *testing.T) {
	s := newStack(t)
	s.company("acme")
	s.company("globex")
	s.fails(ExitFailure, `company "acme" has no active API key to rotate`, "keys", "rotate", "--company", "acme")

	var created newKeyView
	s.jsonOK(&created, "keys", "create", "--company", "acme")
	p, err := apikey.Parse(created.APIKey)
	if err != nil || p.KeyID != created.KeyID || created.State != "active" {
		t.Fatalf("created %+v: %v", created, err)
	}
	s.waitInvalidations(keyInvalidation(created.KeyID))
	s.fails(ExitFailure, `company "acme" already has an active API key`, "keys", "create", "--company", "acme")

	var rotated newKeyView
	s.jsonOK(&rotated, "keys", "rotate", "--company", "acme")
	if rotated.Previous == nil || rotated.Previous.KeyID != created.KeyID || rotated.Previous.State != "rotated" || rotated.Previous.GraceEndsAt == nil {
		t.Fatalf("rotated %+v", rotated)
	}
	if _, err := apikey.Parse(rotated.APIKey); err != nil || rotated.APIKey == created.APIKey {
		t.Fatalf("rotation gave %q: %v", rotated.APIKey, err)
	}
	s.waitInvalidations(keyInvalidation(rotated.KeyID), keyInvalidation(created.KeyID))
	human := s.ok("keys", "rotate", "--company", "acme").stdout
	if !strings.Contains(human, "shown once") || !strings.Contains(human, "service_") {
		t.Fatalf("human rotate output: %q", human)
	}

	var list []keyView
	r := s.ok("keys", "list", "--company", "acme", "--json")
	decodeJSON(t, r.stdout, &list)
	if len(list) != 3 || list[0].State != "active" || list[1].KeyID != rotated.KeyID || list[2].KeyID != created.KeyID {
		t.Fatalf("list = %+v", list)
	}
	table := s.ok("keys", "list", "--company", "acme").stdout
	for _, secret := range []string{created.APIKey, rotated.APIKey, p.Secret} {
		if strings.Contains(r.stdout, secret) || strings.Contains(table, secret) {
			t.Fatal("keys list shows a secret")
		}
	}
	if !strings.Contains(table, created.Masked) || !strings.Contains(table, "GRACE ENDS") {
		t.Fatalf("table = %q", table)
	}

	s.fails(ExitFailure, fmt.Sprintf("API key %q not found", rotated.KeyID), "keys", "revoke", rotated.KeyID, "--company", "globex")
	var revoked keyView
	s.jsonOK(&revoked, "keys", "revoke", rotated.KeyID)
	if revoked.State != "revoked" || revoked.RevokedAt == nil {
		t.Fatalf("revoked %+v", revoked)
	}
	s.waitInvalidations(keyInvalidation(rotated.KeyID))
	s.fails(ExitFailure, "is already revoked", "keys", "revoke", rotated.KeyID, "--company", "acme")
	s.fails(ExitFailure, `API key "nosuchkey" not found`, "keys", "revoke", "nosuchkey")
}

func TestAccounts(t *testing.T) {
	s := newStack(t)
	s.company("acme")
	const secret = "EAAG-secret-token-value"
	environ := append(slices.Clone(s.environ), "PARLEY_ACCOUNT_ACCESS_TOKEN="+secret)
	r := runCLI(t, environ, "", "accounts", "create", "--company", "acme", "--phone-number-id", "106540352242922",
		"--timezone", "Europe/Paris", "--delivery-window", "09:00-20:00", "--throughput", "40", "--json")
	if r.code != 0 {
		t.Fatalf("create: %d %s", r.code, r.stderr)
	}
	var a accountView
	decodeJSON(t, r.stdout, &a)
	if a.PhoneNumberID != "106540352242922" || !a.Connected || a.Timezone != "Europe/Paris" || a.DeliveryWindow == nil ||
		*a.DeliveryWindow != "09:00-20:00" || a.ThroughputPerSecond != 40 || a.Name != "WhatsApp 106540352242922" {
		t.Fatalf("created %+v", a)
	}
	r2 := s.run(secret+"-2\n", "accounts", "create", "--company", "acme", "--phone-number-id", "106540352242923", "--name", "Night line",
		"--access-token-stdin", "--connected=false", "--delivery-window", "22:00-06:00")
	if r2.code != 0 {
		t.Fatalf("create with stdin: %d %s", r2.code, r2.stderr)
	}
	for _, out := range []string{r.stdout, r.stderr, r2.stdout, r2.stderr} {
		if strings.Contains(out, secret) {
			t.Fatal("the access token was echoed")
		}
	}
	cat := catalog.NewStore(s.pool, mustBox(t))
	for id, want := range map[int64]string{a.ID: secret, a.ID + 1: secret + "-2"} {
		if tok, err := cat.AccessToken(context.Background(), id); err != nil || tok != want {
			t.Fatalf("account %d token = %q, %v; want %q", id, tok, err, want)
		}
	}
	s.fails(ExitFailure, "phone number id 106540352242922 already exists", "accounts", "create", "--company", "acme",
		"--phone-number-id", "106540352242922", "--access-token", "x")

	var list []accountView
	s.jsonOK(&list, "accounts", "list", "--company", "acme")
	if len(list) != 2 || list[1].Connected || *list[1].DeliveryWindow != "22:00-06:00" || list[1].Name != "Night line" {
		t.Fatalf("list = %+v", list)
	}

	var up accountView
	s.jsonOK(&up, "accounts", "update", fmt.Sprint(a.ID), "--company", "acme", "--connected=false", "--delivery-window", "none", "--throughput", "5")
	if up.Connected || up.DeliveryWindow != nil || up.ThroughputPerSecond != 5 || up.Timezone != "Europe/Paris" {
		t.Fatalf("updated %+v", up)
	}
	s.company("globex")
	s.fails(ExitFailure, "not found in company \"globex\"", "accounts", "update", fmt.Sprint(a.ID), "--company", "globex", "--connected")
}

func mustBox(t *testing.T) *secretbox.Box {
	t.Helper()
	b, err := secretbox.New(secretbox.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTemplates(t *testing.T) {
	s := newStack(t)
	s.company("acme")
	var tv templateView
	s.jsonOK(&tv, "templates", "create", "--company", "acme", "--name", "order_update", "--header", "image",
		"--header-media-url", "https://cdn.acme.example/b.png", "--body", "first_name=there,var:order_id", "--body", `"literal:Hi, you"`,
		"--url-button-1", "https://acme.example/o/", "--url-button-1-suffix", "latest", "--url-button-2", "https://acme.example/help")
	want := templateView{ID: tv.ID, CompanyID: tv.CompanyID, Name: "order_update", Language: "en_US", HeaderKind: "image",
		HeaderMediaURL: "https://cdn.acme.example/b.png", CreatedAt: tv.CreatedAt}
	if tv.Name != want.Name || tv.Language != want.Language || tv.HeaderKind != want.HeaderKind || tv.HeaderMediaURL != want.HeaderMediaURL {
		t.Fatalf("created %+v", tv)
	}
	if got := bodySummary(tv.BodyParameters); got != "first_name=there, var:order_id, literal:Hi, you" {
		t.Fatalf("body = %q", got)
	}
	if len(tv.URLButtons) != 2 || tv.URLButtons[0] != (urlButtonView{"https://acme.example/o/", "latest"}) || tv.URLButtons[1].Base != "https://acme.example/help" {
		t.Fatalf("buttons = %+v", tv.URLButtons)
	}
	s.fails(ExitFailure, `template "order_update" (en_US) already exists`, "templates", "create", "--company", "acme", "--name", "order_update")
	s.ok("templates", "create", "--company", "acme", "--name", "welcome", "--header", "text", "--header-text", "Welcome!", "--language", "fr_FR")

	var list []templateView
	s.jsonOK(&list, "templates", "list", "--company", "acme")
	if len(list) != 2 || list[1].HeaderText != "Welcome!" || list[1].Language != "fr_FR" || len(list[1].URLButtons) != 0 {
		t.Fatalf("list = %+v", list)
	}
	if table := s.ok("templates", "list", "--company", "acme").stdout; !strings.Contains(table, "first_name=there, var:order_id") {
		t.Fatalf("table = %q", table)
	}
}

func TestCampaignsAutomationsConnectors(t *testing.T) {
	s := newStack(t)
	s.company("acme")
	s.company("globex")
	var tpl templateView
	s.jsonOK(&tpl, "templates", "create", "--company", "acme", "--name", "t1")
	var acct accountView
	s.jsonOK(&acct, "accounts", "create", "--company", "acme", "--phone-number-id", "111", "--access-token", "tok")
	tid, aid := fmt.Sprint(tpl.ID), fmt.Sprint(acct.ID)

	var camp catalog.Campaign
	s.jsonOK(&camp, "campaigns", "create", "--company", "acme", "--name", "Spring sale", "--template", tid, "--account", aid)
	if camp.Name != "Spring sale" || camp.TemplateID != tpl.ID || camp.MessagingAccountID != acct.ID {
		t.Fatalf("campaign %+v", camp)
	}
	s.fails(ExitFailure, "not found in company \"globex\"", "campaigns", "create", "--company", "globex", "--name", "x", "--template", tid, "--account", aid)
	var camps []catalog.Campaign
	s.jsonOK(&camps, "campaigns", "list", "--company", "acme")
	if len(camps) != 1 || camps[0].ID != camp.ID {
		t.Fatalf("campaigns = %+v", camps)
	}

	var auto catalog.Automation
	s.jsonOK(&auto, "automations", "create", "--company", "acme", "--name", "Order update", "--active", "--template", tid,
		"--account", aid, "--variables", "order_id,tracking_url,order_id")
	if !auto.Active || auto.Type != catalog.TypeAPI || !slices.Equal(auto.TriggerVariables, []string{"order_id", "tracking_url"}) || !auto.AccountConnected {
		t.Fatalf("automation %+v", auto)
	}
	var bare catalog.Automation
	s.jsonOK(&bare, "automations", "create", "--company", "acme", "--name", "Misconfigured", "--type", "event")
	if bare.Active || bare.TemplateID != nil || bare.MessagingAccountID != nil || bare.TriggerVariables == nil {
		t.Fatalf("bare automation %+v", bare)
	}
	s.fails(ExitFailure, "not found in company \"globex\"", "automations", "create", "--company", "globex", "--name", "x", "--template", tid)

	var off catalog.Automation
	s.jsonOK(&off, "automations", "update", fmt.Sprint(auto.ID), "--company", "acme", "--active=false")
	if off.Active {
		t.Fatal("automation still active")
	}
	s.waitInvalidations(bus.Invalidation{Kind: bus.KindAutomation, ID: fmt.Sprint(auto.ID)})
	s.fails(ExitFailure, fmt.Sprintf("automation %d not found in company \"globex\"", auto.ID), "automations", "update", fmt.Sprint(auto.ID), "--company", "globex", "--active")
	var autos []catalog.Automation
	s.jsonOK(&autos, "automations", "list", "--company", "acme")
	if len(autos) != 2 || autos[0].Active {
		t.Fatalf("automations = %+v", autos)
	}

	var conn catalog.Connector
	s.jsonOK(&conn, "connectors", "create", "--company", "acme", "--name", "shopify", "--connected", "--automation", fmt.Sprint(auto.ID))
	if !conn.Connected || conn.TargetAutomationID == nil || *conn.TargetAutomationID != auto.ID || conn.TargetCampaignID != nil {
		t.Fatalf("connector %+v", conn)
	}
	s.fails(ExitFailure, `connector "shopify" already exists`, "connectors", "create", "--company", "acme", "--name", "shopify")
	s.fails(ExitFailure, "campaign 999 not found", "connectors", "create", "--company", "acme", "--name", "klaviyo", "--campaign", "999")
	s.ok("connectors", "create", "--company", "acme", "--name", "klaviyo", "--campaign", fmt.Sprint(camp.ID))
	var upd catalog.Connector
	s.jsonOK(&upd, "connectors", "update", "shopify", "--company", "acme", "--connected=false")
	if upd.Connected {
		t.Fatal("connector still connected")
	}
	s.waitInvalidations(bus.Invalidation{Kind: bus.KindConnector, ID: fmt.Sprint(conn.ID)})
	s.fails(ExitFailure, `connector "nope" not found`, "connectors", "update", "nope", "--company", "acme", "--connected")
	var conns []catalog.Connector
	s.jsonOK(&conns, "connectors", "list", "--company", "acme")
	if len(conns) != 2 || conns[0].Connected || conns[1].TargetCampaignID == nil {
		t.Fatalf("connectors = %+v", conns)
	}
}

func TestParseBinding(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // formatBinding of the result, or "error"
	}{
		{"first_name", "first_name"},
		{"first_name=there", "first_name=there"},
		{"last_name=", "last_name"},
		{"phone", "phone"},
		{"var:order_id", "var:order_id"},
		{"var:order_id=N/A", "var:order_id=N/A"},
		{"literal:a=b, c", "literal:a=b, c"},
		{"literal:", "error"},
		{"var:", "error"},
		{"var:" + strings.Repeat("x", 101), "error"},
		{"email", "error"},
	} {
		b, err := parseBinding(tc.in)
		got := "error"
		if err == nil {
			got = formatBinding(b)
		}
		if got != tc.want {
			t.Errorf("parseBinding(%q) -> %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseWindow(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"09:00-20:00", "09:00-20:00"},
		{" 9:30 - 17:05 ", "09:30-17:05"},
		{"22:00-06:00", "22:00-06:00"},
		{"00:00-23:59", "00:00-23:59"},
		{"10:00-10:00", "error"},
		{"25:00-26:00", "error"},
		{"09:00", "error"},
	} {
		w, err := parseWindow(tc.in)
		got := "error"
		if err == nil {
			got = formatWindow(w)
		}
		if got != tc.want {
			t.Errorf("parseWindow(%q) -> %q, want %q", tc.in, got, tc.want)
		}
	}
}
