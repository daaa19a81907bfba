package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/testkit/simtest"
)

// withSim serves provider-sim in-process (reviews wait an hour) and points
// parleyctl's PARLEY_WHATSAPP_BASE_URL at it.
func (s *stack) withSim() *whatsappsim.Sim {
	s.t.Helper()
	sim, url := simtest.Serve(s.t, nil)
	s.environ = append(s.environ, "PARLEY_WHATSAPP_BASE_URL="+url)
	return sim
}

const orderComponents = `[{"type": "HEADER", "format": "TEXT", "text": "Order {{1}}"},
 {"type": "BODY", "text": "Hi {{1}}, your order {{2}} has shipped."},
 {"type": "BUTTONS", "buttons": [{"type": "URL", "text": "Track", "url": "https://acme.example/track/{{1}}"}]}]`

func TestTemplatesThroughTheProvider(t *testing.T) {
	s := newStack(t)
	sim := s.withSim()
	s.company("acme")
	var acct accountView
	s.jsonOK(&acct, "accounts", "create", "--company", "acme", "--name", "Main line", "--phone-number-id", "2001", "--access-token", "tok-2001",
		"--waba-id", "7001")
	if acct.WABAID != "7001" || acct.PortfolioID != "7001" {
		t.Fatalf("account %+v", acct)
	}
	if err := sim.SetAccount(whatsappsim.Account{PhoneNumberID: "2001", Token: "tok-2001", WABAID: "7001"}); err != nil {
		t.Fatal(err)
	}
	aid := fmt.Sprint(acct.ID)
	create := []string{"templates", "create", "--company", "acme", "--account", aid, "--name", "order_update", "--category", "UTILITY",
		"--body", "first_name=there,var:order_id", "--header-text", "update", "--url-button-1-suffix", "latest", "--components", "-"}

	r := s.run(orderComponents, append(create, "--json")...)
	if r.code != 0 {
		t.Fatalf("create: exit %d: %s", r.code, r.stderr)
	}
	var tv templateView
	decodeJSON(t, r.stdout, &tv)
	if tv.Status != "PENDING" || tv.Category != "UTILITY" || tv.HeaderKind != "text" || tv.ProviderTemplateID == "" ||
		len(tv.URLButtons) != 1 || tv.URLButtons[0] != (urlButtonView{"https://acme.example/track/", "latest"}) || len(tv.History) != 1 {
		t.Fatalf("created %+v", tv)
	}
	if st, ok := sim.TemplateByID(tv.ProviderTemplateID); !ok || st.WABAID != "7001" || st.BodyParameters != 2 {
		t.Fatalf("the provider has %+v", st)
	}

	// Refused before the provider, by the provider, or by Parley.
	if _, err := sim.CreateTemplate("7001", whatsapp.TemplateDefinition{Name: "taken", Language: "en_US", Category: "UTILITY",
		Components: []whatsapp.TemplateComponent{{Type: "BODY", Text: "Hi {{1}} {{2}}"}}}); err != nil {
		t.Fatal(err)
	}
	with := func(name string, extra ...string) []string {
		args := append([]string{}, create...)
		args[7] = name
		return append(args, extra...)
	}
	for _, tt := range []struct {
		args  []string
		stdin string
		code  int
		want  string
	}{
		{with("x1", "--body", "phone"), orderComponents, ExitUsage, "--body: the body has 2 variables and 3 bindings"},
		{with("x2", "--header", "text"), orderComponents, ExitUsage, "--header goes without --account"},
		{with("x3"), "not json", ExitUsage, "--components: not a JSON array"},
		{with("x4", "--category", "AUTHENTICATION"), orderComponents, ExitUsage, "--category: AUTHENTICATION"},
		{with("taken"), orderComponents, ExitFailure, "the provider refused the template"},
		{with("order_update"), orderComponents, ExitFailure, `template "order_update" (en_US) already exists`},
		{append(with("x5"), "--account", "999"), orderComponents, ExitUsage, "--account 999: no messaging account"},
		{[]string{"templates", "create", "--company", "acme", "--name", "x6", "--category", "UTILITY"}, "", ExitUsage, "--category and --components go with --account"},
	} {
		s.failsWithInput(tt.stdin, tt.code, tt.want, tt.args...)
	}
	if n := s.count("templates"); n != 1 {
		t.Fatalf("%d templates kept", n)
	}

	// Paused at the provider (as a webhook records it): list and show say so.
	until := time.Date(2026, 5, 1, 15, 0, 0, 0, time.UTC)
	if _, err := record.ApplyTemplateChange(context.Background(), s.pool, record.TemplateChange{CompanyID: tv.CompanyID, TemplateID: tv.ID,
		Status: "PAUSED", Reason: "FIRST_PAUSE", PausedUntil: until, Source: record.SourceWebhook}); err != nil {
		t.Fatal(err)
	}
	list := s.ok("templates", "list", "--company", "acme").stdout
	if !strings.Contains(list, "PAUSED (FIRST_PAUSE)") || !strings.Contains(list, "UTILITY") || !strings.Contains(list, "2026-05-01") {
		t.Fatalf("list:\n%s", list)
	}
	show := s.ok("templates", "show", fmt.Sprint(tv.ID), "--company", "acme").stdout
	for _, want := range []string{"PAUSED (FIRST_PAUSE)", "paused until", "2026-05-01", "PENDING", "submit", "webhook"} {
		if !strings.Contains(show, want) {
			t.Fatalf("show lacks %q:\n%s", want, show)
		}
	}
	s.fails(ExitFailure, "template 999 not found", "templates", "show", "999", "--company", "acme")
}

func TestNumbersAndPortfolios(t *testing.T) {
	s := newStack(t)
	s.company("acme")
	s.ok("accounts", "create", "--company", "acme", "--name", "Main line", "--phone-number-id", "2001", "--access-token", "t", "--waba-id", "7001")
	s.ok("accounts", "create", "--company", "acme", "--name", "Support", "--phone-number-id", "2002", "--access-token", "t", "--waba-id", "7001")
	s.ok("accounts", "create", "--company", "acme", "--name", "Alone", "--phone-number-id", "2003", "--access-token", "t")
	s.fails(ExitUsage, `--waba-id "x7": digits only`, "accounts", "create", "--company", "acme", "--phone-number-id", "2004", "--access-token", "t", "--waba-id", "x7")
	if _, err := s.pool.Exec(context.Background(), `UPDATE messaging_accounts SET quality_rating = 'RED' WHERE phone_number_id = '2002'`); err != nil {
		t.Fatal(err)
	}

	r := s.ok("portfolios", "set-tier", "7001", "--company", "acme", "--tier", "TIER_2K")
	if !strings.Contains(r.stdout, "TIER_2K (2000 unique users in 24 hours)") || !strings.Contains(r.stdout, "2 numbers") {
		t.Fatalf("set-tier: %s", r.stdout)
	}
	s.fails(ExitUsage, `--tier "TIER_3K"`, "portfolios", "set-tier", "7001", "--company", "acme", "--tier", "TIER_3K")
	s.fails(ExitFailure, "portfolio 8888: none of company", "portfolios", "set-tier", "8888", "--company", "acme", "--tier", "TIER_250")

	var nums []numberView
	s.jsonOK(&nums, "numbers", "list", "--company", "acme")
	if len(nums) != 3 || nums[1].Name != "Support" || nums[1].QualityRating != "RED" || nums[1].Tier != "TIER_2K" || nums[1].TierSource != "operator" ||
		nums[2].Tier != "TIER_UNLIMITED" || nums[2].WABAID != "2003" {
		t.Fatalf("numbers %+v", nums)
	}
	table := s.ok("numbers", "list", "--company", "acme").stdout
	for _, want := range []string{"Support", "RED", "TIER_2K", "2000", "unlimited", "operator"} {
		if !strings.Contains(table, want) {
			t.Fatalf("numbers table lacks %q:\n%s", want, table)
		}
	}
}
