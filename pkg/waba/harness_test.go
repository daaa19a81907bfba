package waba_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/pkg/waba"
	"github.com/parleyhq/parley/testkit/simtest"
	"github.com/parleyhq/parley/testkit/storetest"
)

const appSecret = "test-app-secret"

// fixture is a fresh database with a company (acme) and its number 2001 of
// WABA 7001, provider-sim serving that number, and a webhook receiver that
// applies the sim's account webhooks as the gateway does.
type fixture struct {
	t    *testing.T
	pool *pgxpool.Pool
	cat  *catalog.Store
	sim  *whatsappsim.Sim
	deps waba.Deps
	co   catalog.Company
	acct catalog.MessagingAccount

	mu      sync.Mutex
	applied int // webhook deliveries applied
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	_, pool := storetest.NewDatabase(t)
	box, err := secretbox.New(secretbox.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, pool: pool, cat: catalog.NewStore(pool, box)}
	sim, url := simtest.Serve(t, func(r *whatsappsim.Rules) {
		r.RejectTemplatesMatching, r.TemplateRejectReason = "^spam", "SCAM"
		r.TimeScale = 0.001 // a first pause of 10.8 s
	})
	f.sim = sim
	client, err := whatsapp.NewClient(whatsapp.Config{BaseURL: url, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	f.deps = waba.Deps{Pool: pool, Catalog: f.cat, Provider: client, Log: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))}
	if f.co, err = f.cat.CreateCompany(ctx, catalog.NewCompany{Slug: "acme", Name: "Acme", SubscriptionActive: true, Provisioned: true}); err != nil {
		t.Fatal(err)
	}
	f.acct = f.number("Main line", "2001", "7001")
	return f
}

// number adds a number of acme in waba, served by the sim.
func (f *fixture) number(name, pnid, waba string) catalog.MessagingAccount {
	f.t.Helper()
	a, err := f.cat.CreateMessagingAccount(context.Background(), catalog.NewMessagingAccount{CompanyID: f.co.ID, Name: name,
		PhoneNumberID: pnid, AccessToken: "tok-" + pnid, Connected: true, WABAID: waba})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.sim.SetAccount(whatsappsim.Account{PhoneNumberID: pnid, Token: "tok-" + pnid, WABAID: waba}); err != nil {
		f.t.Fatal(err)
	}
	return a
}

// receive points the sim's webhooks at a receiver that applies them.
func (f *fixture) receive() {
	f.t.Helper()
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !whatsapp.VerifySignature(appSecret, body, r.Header.Get(whatsapp.SignatureHeader)) {
			f.t.Errorf("unsigned webhook")
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		hook, err := whatsapp.ParseWebhook(body)
		if err == nil {
			_, err = waba.ApplyChanges(r.Context(), f.deps, hook.Account)
		}
		if err != nil {
			f.t.Errorf("apply webhook: %v", err)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		f.mu.Lock()
		f.applied++
		f.mu.Unlock()
	}))
	f.t.Cleanup(rcv.Close)
	if err := f.sim.SetCallbacks(whatsappsim.CallbackSettings{URL: rcv.URL, AppSecret: appSecret}); err != nil {
		f.t.Fatal(err)
	}
}

// template reads a template of acme.
func (f *fixture) template(id int64) catalog.Template {
	f.t.Helper()
	t, err := f.cat.CompanyTemplate(context.Background(), f.co.ID, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return t
}

// waitTemplate reads a template until cond holds.
func (f *fixture) waitTemplate(id int64, what string, cond func(catalog.Template) bool) catalog.Template {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		t := f.template(id)
		if cond(t) {
			return t
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("template %d never %s: %+v", id, what, t.TemplateState)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// orderUpdate is a utility template with a text header variable, two body
// variables and a dynamic URL button.
func orderUpdate(name string) whatsapp.TemplateDefinition {
	return whatsapp.TemplateDefinition{Name: name, Language: "en_US", Category: "utility", Components: []whatsapp.TemplateComponent{
		{Type: "HEADER", Format: "TEXT", Text: "Order {{1}}"},
		{Type: "BODY", Text: "Hi {{1}}, your order {{2}} has shipped."},
		{Type: "FOOTER", Text: "Acme"},
		{Type: "BUTTONS", Buttons: []whatsapp.TemplateButton{{Type: "URL", Text: "Track", URL: "https://acme.example/track/{{1}}"},
			{Type: "QUICK_REPLY", Text: "Thanks"}}},
	}}
}

func (f *fixture) newTemplate(def whatsapp.TemplateDefinition) waba.NewTemplate {
	return waba.NewTemplate{CompanyID: f.co.ID, MessagingAccountID: f.acct.ID, Definition: def,
		BodyParameters: []whatsapp.Binding{{Source: "first_name", Default: "there"}, {Source: "variable", Name: "order_id"}},
		HeaderText:     "update", URLSuffixes: []string{"latest"}}
}

// strconvID reads a provider id into a webhook's numeric template id.
func strconvID(s string, out *int64) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	*out = n
	return n, err
}
