package whatsapp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
	"github.com/parleyhq/parley/testkit/simtest"
)

// newSim serves provider-sim with one number of WABA 7001; names starting
// with spam are rejected when reviewed.
func newSim(t *testing.T) (*whatsappsim.Sim, string) {
	t.Helper()
	sim, url := simtest.Serve(t, func(r *whatsappsim.Rules) { r.RejectTemplatesMatching = "^spam" })
	if err := sim.SetAccount(whatsappsim.Account{PhoneNumberID: "1234567890", Token: "EAAG-test-token", WABAID: "7001"}); err != nil {
		t.Fatal(err)
	}
	return sim, url
}

func definition(name string) whatsapp.TemplateDefinition {
	return whatsapp.TemplateDefinition{Name: name, Language: "en_US", Category: whatsapp.CategoryUtility,
		Components: []whatsapp.TemplateComponent{{Type: "BODY", Text: "Hi {{1}}, order {{2}} is on its way."}}}
}

func TestCreateTemplateAtTheProvider(t *testing.T) {
	sim, base := newSim(t)
	cl := newClient(t, base, 5*time.Second)
	ctx := context.Background()

	got, err := cl.CreateTemplate(ctx, acct, "7001", definition("order_shipped"))
	if err != nil {
		t.Fatal(err)
	}
	if got.ID == "" || got.Status != whatsapp.TemplatePending || got.Category != whatsapp.CategoryUtility {
		t.Fatalf("created %+v", got)
	}
	st, ok := sim.TemplateByID(got.ID)
	if !ok || st.WABAID != "7001" || st.Name != "order_shipped" || st.BodyParameters != 2 {
		t.Fatalf("the provider has %+v (%v)", st, ok)
	}

	tests := []struct {
		name    string
		waba    string
		acct    whatsapp.Account
		def     whatsapp.TemplateDefinition
		code    int
		class   whatsapp.Class
		message string
	}{
		{"same name and language twice", "7001", acct, definition("order_shipped"), 100, whatsapp.Permanent, "already exists"},
		{"a definition the provider refuses", "7001", acct, whatsapp.TemplateDefinition{Name: "Bad Name", Language: "en_US", Category: "UTILITY",
			Components: []whatsapp.TemplateComponent{{Type: "BODY", Text: "x"}}}, 100, whatsapp.Permanent, "lowercase"},
		{"another number's token", "7001", whatsapp.Account{PhoneNumberID: "1", AccessToken: "wrong"}, definition("x1"), 190, whatsapp.RetryLater, ""},
		{"an unknown WABA", "9999", acct, definition("x2"), 100, whatsapp.RetryLater, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := cl.CreateTemplate(ctx, tt.acct, tt.waba, tt.def)
			var we *whatsapp.Error
			if !errors.As(err, &we) || we.Code != tt.code || we.Class != tt.class || !strings.Contains(we.Error(), tt.message) {
				t.Fatalf("err = %#v", err)
			}
		})
	}
	if _, err := cl.CreateTemplate(ctx, whatsapp.Account{}, "7001", definition("x3")); err == nil {
		t.Fatal("a call without a token went out")
	}
}

func TestListTemplatesFollowsPaging(t *testing.T) {
	sim, base := newSim(t)
	cl := newClient(t, base, 5*time.Second)
	ctx := context.Background()
	const n = 230 // three pages of 100
	for i := range n {
		if _, err := sim.CreateTemplate("7001", definition(fmt.Sprintf("t%03d", i))); err != nil {
			t.Fatal(err)
		}
	}
	rejected, err := sim.CreateTemplate("7001", definition("spam_offer"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.ReviewTemplate(rejected.ID, whatsapp.TemplateRejected, "SCAM"); err != nil {
		t.Fatal(err)
	}
	list, err := cl.ListTemplates(ctx, acct, "7001")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != n+1 {
		t.Fatalf("listed %d templates, want %d", len(list), n+1)
	}
	seen := map[string]bool{}
	for _, m := range list {
		if seen[m.ID] {
			t.Fatalf("template %s listed twice", m.ID)
		}
		seen[m.ID] = true
		if m.ID == rejected.ID && (m.Status != whatsapp.TemplateRejected || m.RejectedReason != "SCAM") {
			t.Fatalf("rejected template listed as %+v", m)
		}
	}
	if _, err := cl.ListTemplates(ctx, whatsapp.Account{AccessToken: "wrong"}, "7001"); err == nil {
		t.Fatal("a wrong token listed templates")
	}
}

// A next page on another host is never followed with the token.
func TestListTemplatesStaysOnItsHost(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the token went to another host: %s", r.Header.Get("Authorization"))
	}))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"data":[{"id":"1","name":"a","language":"en","status":"APPROVED","category":"UTILITY"}],"paging":{"cursors":{"before":"x","after":"y"},"next":%q}}`,
			other.URL+"/v21.0/7001/message_templates?after=y")
	}))
	defer srv.Close()
	_, err := newClient(t, srv.URL, 5*time.Second).ListTemplates(context.Background(), acct, "7001")
	if err == nil || !strings.Contains(err.Error(), "is not under") {
		t.Fatalf("err = %v", err)
	}
}
