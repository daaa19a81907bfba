package main

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// The Templates page without a browser: a created template lands on its
// page; a provider refusal and a name taken are said on the form and keep
// nothing; a member's post is refused.
func TestConsoleTemplates(t *testing.T) {
	e := newEnv(t, nil)
	main := e.number("Main line", "2001", "7001")
	b := e.browser()
	b.mustSignIn("ada@acme.example")
	form := url.Values{"messaging_account_id": {strconv.FormatInt(main.ID, 10)}, "name": {"order_update"}, "language": {"en_US"},
		"category": {"UTILITY"}, "components": {browserComponents},
		"body_parameters": {`[{"source": "first_name"}, {"source": "variable", "name": "order_id"}]`}}
	p := b.post("/templates", form)
	if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Header.Get("Location"), "/templates/") {
		t.Fatalf("create: %d %s", p.Status, p.Header.Get("Location"))
	}
	if page := b.get(p.Header.Get("Location")); page.Status != 200 || !strings.Contains(page.Body, "order_update") || !strings.Contains(page.Body, "PENDING") {
		t.Fatalf("template page %d", page.Status)
	}
	if p := b.post("/templates", form); p.Status != http.StatusConflict || !strings.Contains(p.Body, "already has a template") {
		t.Fatalf("again: %d", p.Status)
	}
	form.Set("name", "taken")
	if _, err := e.Sim.CreateTemplate("7001", mustDefinition("taken")); err != nil {
		t.Fatal(err)
	}
	if p := b.post("/templates", form); p.Status != http.StatusUnprocessableEntity || !strings.Contains(p.Body, "The provider refused the template") {
		t.Fatalf("refused: %d\n%s", p.Status, p.Body)
	}
	form.Set("components", "not json")
	if p := b.post("/templates", form); p.Status != http.StatusUnprocessableEntity || !strings.Contains(p.Body, "JSON array") {
		t.Fatalf("bad components: %d", p.Status)
	}
	if n := e.templateCount(); n != 1 {
		t.Fatalf("%d templates kept", n)
	}
	if p := b.get("/templates/999999"); p.Status != http.StatusNotFound {
		t.Fatalf("unknown template: %d", p.Status)
	}
	if p := b.get("/numbers"); p.Status != 200 || !strings.Contains(p.Body, "Main line") || !strings.Contains(p.Body, "TIER_UNLIMITED") {
		t.Fatalf("numbers: %d", p.Status)
	}

	m := e.browser()
	m.mustSignIn("max@acme.example")
	form.Set("name", "by_member")
	form.Set("components", browserComponents)
	if p := m.post("/templates", form); p.Status != http.StatusForbidden {
		t.Fatalf("member's create: %d", p.Status)
	}
	if p := m.get("/templates"); p.Status != 200 || strings.Contains(p.Body, `id="create-template"`) {
		t.Fatalf("member's page: %d", p.Status)
	}
}
