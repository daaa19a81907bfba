package main

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/services/admin/internal/config"
)

// catalog is the env's catalog, with the token box.
func (e *env) catalog() *catalog.Store {
	box, err := secretbox.New(secretbox.DevKey)
	if err != nil {
		e.t.Fatal(err)
	}
	return catalog.NewStore(e.Pool, box)
}

// number connects a number of the env's company in WABA waba, which
// provider-sim serves with the same token.
func (e *env) number(name, pnid, waba string) catalog.MessagingAccount {
	e.t.Helper()
	a, err := e.catalog().CreateMessagingAccount(context.Background(), catalog.NewMessagingAccount{CompanyID: e.CompanyID, Name: name,
		PhoneNumberID: pnid, AccessToken: "tok-" + pnid, Connected: true, WABAID: waba})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.Sim.SetAccount(whatsappsim.Account{PhoneNumberID: pnid, Token: "tok-" + pnid, WABAID: waba}); err != nil {
		e.t.Fatal(err)
	}
	return a
}

// templateCount is how many templates the env's company has.
func (e *env) templateCount() int {
	e.t.Helper()
	var n int
	if err := e.Pool.QueryRow(context.Background(), `SELECT count(*) FROM templates WHERE company_id = $1`, e.CompanyID).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

const orderUpdateBody = `{"messaging_account_id": %d, "name": "order_update", "language": "en_US", "category": "UTILITY",
  "components": [
    {"type": "HEADER", "format": "TEXT", "text": "Order {{1}}"},
    {"type": "BODY", "text": "Hi {{1}}, your order {{2}} has shipped."},
    {"type": "BUTTONS", "buttons": [{"type": "URL", "text": "Track", "url": "https://acme.example/track/{{1}}"}]}],
  "header_text": "update",
  "body_parameters": [{"source": "first_name", "default": "there"}, {"source": "variable", "name": "order_id"}],
  "url_buttons": [{"default_suffix": "latest"}]}`

func TestAdminAPITemplates(t *testing.T) {
	e := newEnv(t, func(c *config.Config) { c.AdminToken = testAdminToken })
	main := e.number("Main line", "2001", "7001")
	base := "/admin/api/companies/" + strconv.FormatInt(e.CompanyID, 10)
	body := strings.Replace(orderUpdateBody, "%d", strconv.FormatInt(main.ID, 10), 1)

	a := callJSON(t, e, http.MethodPost, base+"/templates", body)
	if a.Status != http.StatusCreated {
		t.Fatalf("create: %d %v", a.Status, a.Body)
	}
	tpl := a.Body["template"].(map[string]any)
	num := tpl["messaging_account"].(map[string]any)
	if tpl["status"] != "PENDING" || tpl["category"] != "UTILITY" || tpl["name"] != "order_update" || tpl["header_kind"] != "text" ||
		num["name"] != "Main line" || num["phone_number_id"] != "2001" || len(tpl["history"].([]any)) != 1 {
		t.Fatalf("created %v", tpl)
	}
	pid := tpl["provider_template_id"].(string)
	if st, ok := e.Sim.TemplateByID(pid); !ok || st.Status != "PENDING" || st.WABAID != "7001" {
		t.Fatalf("the provider has %+v", st)
	}
	id := strconv.FormatInt(int64(tpl["id"].(float64)), 10)

	// The provider rejects it; Parley learns it (here by the record, as a
	// webhook or the sync would write it) and shows the reason.
	if _, err := e.Sim.ReviewTemplate(pid, "REJECTED", "INVALID_FORMAT"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Pool.Exec(context.Background(), `UPDATE templates SET status = 'REJECTED', status_reason = 'INVALID_FORMAT' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	a = callJSON(t, e, http.MethodGet, base+"/templates/"+id, "")
	if got := a.Body["template"].(map[string]any); a.Status != 200 || got["status"] != "REJECTED" || got["status_reason"] != "INVALID_FORMAT" {
		t.Fatalf("show: %d %v", a.Status, a.Body)
	}
	a = callJSON(t, e, http.MethodGet, base+"/templates", "")
	if list := a.Body["templates"].([]any); a.Status != 200 || len(list) != 1 || list[0].(map[string]any)["status"] != "REJECTED" {
		t.Fatalf("list: %d %v", a.Status, a.Body)
	}

	bad := []struct {
		name, body string
		status     int
		want       string
	}{
		{"not JSON", `{"name":`, 400, "not valid JSON"},
		{"unknown field", `{"nme": "x"}`, 422, "nme:extra_forbidden"},
		{"bad name", strings.Replace(body, `"order_update"`, `"Order Update"`, 1), 422, "name:value_error"},
		{"a binding missing", strings.Replace(body, `, {"source": "variable", "name": "order_id"}`, "", 1), 422, "body_parameters:value_error"},
		{"a binding of no source", strings.Replace(body, `"source": "first_name"`, `"source": "nickname"`, 1), 422, "body_parameters:value_error"},
		{"another number", strings.Replace(body, `"messaging_account_id": `+strconv.FormatInt(main.ID, 10), `"messaging_account_id": 999999`, 1), 422, "messaging_account_id:value_error"},
		{"a name Parley has", body, 409, "already has a template"},
		{"the provider refuses", strings.Replace(body, `"order_update"`, `"taken_at_provider"`, 1), 422, "the provider refused the template"},
	}
	if _, err := e.Sim.CreateTemplate("7001", whatsapp.TemplateDefinition{Name: "taken_at_provider", Language: "en_US", Category: "UTILITY",
		Components: []whatsapp.TemplateComponent{{Type: "BODY", Text: "Hi"}}}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			before := e.templateCount()
			a := callJSON(t, e, http.MethodPost, base+"/templates", tt.body)
			if a.Status != tt.status || !strings.Contains(strings.Join(a.locs(), ",")+a.detail(), tt.want) {
				t.Fatalf("%d %v", a.Status, a.Body)
			}
			if e.templateCount() != before {
				t.Fatal("a refused template was kept")
			}
		})
	}
	if a := callJSON(t, e, http.MethodGet, base+"/templates/424242", ""); a.Status != 404 {
		t.Fatalf("unknown template: %d", a.Status)
	}
	if a := callJSON(t, e, http.MethodGet, "/admin/api/companies/999999/templates", ""); a.Status != 404 {
		t.Fatalf("unknown company: %d", a.Status)
	}
}

func TestAdminAPINumbersAndPortfolios(t *testing.T) {
	e := newEnv(t, func(c *config.Config) { c.AdminToken = testAdminToken })
	e.number("Main line", "2001", "7001")
	e.number("Support", "2002", "7001")
	e.number("Alone", "2003", "")
	base := "/admin/api/companies/" + strconv.FormatInt(e.CompanyID, 10)
	at := time.Now()
	if _, err := e.Pool.Exec(context.Background(), `UPDATE messaging_accounts SET quality_rating = 'YELLOW', quality_updated_at = $1 WHERE phone_number_id = '2002'`, at); err != nil {
		t.Fatal(err)
	}

	a := callJSON(t, e, http.MethodPut, base+"/portfolios/7001", `{"tier": "TIER_2K"}`)
	p, _ := a.Body["portfolio"].(map[string]any)
	if a.Status != 200 || p["tier"] != "TIER_2K" || p["limit"] != 2000.0 || p["source"] != "operator" || len(p["numbers"].([]any)) != 2 {
		t.Fatalf("set tier: %d %v", a.Status, a.Body)
	}
	for _, tt := range []struct {
		path, body string
		status     int
	}{
		{base + "/portfolios/7001", `{"tier": "TIER_3K"}`, 422},
		{base + "/portfolios/7001", `{"tier": 5}`, 422},
		{base + "/portfolios/8888", `{"tier": "TIER_250"}`, 404},
	} {
		if a := callJSON(t, e, http.MethodPut, tt.path, tt.body); a.Status != tt.status {
			t.Fatalf("PUT %s %s: %d %v", tt.path, tt.body, a.Status, a.Body)
		}
	}

	a = callJSON(t, e, http.MethodGet, base+"/numbers", "")
	nums, _ := a.Body["numbers"].([]any)
	if a.Status != 200 || len(nums) != 3 {
		t.Fatalf("numbers: %d %v", a.Status, a.Body)
	}
	support, alone := nums[1].(map[string]any), nums[2].(map[string]any)
	if support["name"] != "Support" || support["quality_rating"] != "YELLOW" || support["tier"] != "TIER_2K" || support["waba_id"] != "7001" ||
		support["portfolio_id"] != "7001" || support["tier_source"] != "operator" || support["quality_updated_at"] == nil {
		t.Fatalf("support %v", support)
	}
	if alone["quality_rating"] != "UNKNOWN" || alone["tier"] != "TIER_UNLIMITED" || alone["limit"] != 0.0 || alone["waba_id"] != "2003" {
		t.Fatalf("alone %v", alone)
	}
	a = callJSON(t, e, http.MethodGet, base+"/portfolios", "")
	if ps, _ := a.Body["portfolios"].([]any); a.Status != 200 || len(ps) != 2 {
		t.Fatalf("portfolios: %d %v", a.Status, a.Body)
	}
}

// mustDefinition is a one-variable utility template.
func mustDefinition(name string) whatsapp.TemplateDefinition {
	return whatsapp.TemplateDefinition{Name: name, Language: "en_US", Category: "UTILITY",
		Components: []whatsapp.TemplateComponent{{Type: "BODY", Text: "Hi {{1}}"}}}
}
