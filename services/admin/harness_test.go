package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/parleyhq/parley/pkg/apikey"
	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
	"github.com/parleyhq/parley/pkg/ops"
	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/pkg/store"
	"github.com/parleyhq/parley/pkg/webhooks"
	"github.com/parleyhq/parley/services/admin/internal/accounts"
	"github.com/parleyhq/parley/services/admin/internal/config"
	"github.com/parleyhq/parley/testkit/bustest"
	"github.com/parleyhq/parley/testkit/simtest"
	"github.com/parleyhq/parley/testkit/storetest"
)

// testClock is the app's clock in tests, moved by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t.
func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// syncBuffer collects the app's log output, to check what it never contains.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Sync() error { return nil }

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

const testPassword = "correct horse battery staple"

// env is one admin app on a fresh database and its own NATS server, with a
// company that has an admin and a member.
type env struct {
	t         *testing.T
	URL       string
	Pool      *pgxpool.Pool
	Clock     *testClock
	Keys      *apikey.Store
	Logs      *syncBuffer
	CompanyID int64
	Admin     accounts.User
	Member    accounts.User
	// DatabaseURL is the app's database; Bus its stream and subjects.
	DatabaseURL string
	Bus         bus.Config
	// NATS is the app's own server, for outages.
	NATS *bustest.Server
	// Invalidations receives every invalidation broadcast on the app's bus.
	Invalidations chan bus.Invalidation
	// Sim is provider-sim, where templates are submitted (SimURL).
	Sim    *whatsappsim.Sim
	SimURL string
}

// newEnv starts the app in-process through newApp. change adjusts the
// configuration before the app is built.
func newEnv(t *testing.T, change func(*config.Config)) *env {
	t.Helper()
	ctx := context.Background()
	dbURL, pool := storetest.NewDatabase(t)
	ns := bustest.NewServer(t)
	sim, simURL := simtest.Serve(t, nil)
	cfg := config.Config{
		Addr:       "127.0.0.1:0",
		AdminToken: "",
		Console: config.Console{
			SessionLifetime: 12 * time.Hour, SessionIdleTimeout: 2 * time.Hour,
			LoginMaxFailuresPerEmail: 5, LoginMaxFailuresPerIP: 20, LoginFailureWindow: 15 * time.Minute,
		},
		Log:      ops.LogConfig{Level: "debug", Format: "json"},
		Postgres: store.Config{URL: dbURL, MaxConns: 5},
		NATS:     bustest.Config(ns.URL()),
		Token:    secretbox.Config{Key: secretbox.DevKey},
		Webhooks: webhooks.DefaultConfig(),
		Provider: whatsapp.ProviderConfig{BaseURL: simURL, APIVersion: "v21.0", Timeout: 5 * time.Second, MaxConns: 16},
	}
	if change != nil {
		change(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("test configuration: %v", err)
	}

	clock := &testClock{now: time.Date(2025, 6, 2, 9, 30, 0, 0, time.UTC)}
	logs := &syncBuffer{}
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), logs, zapcore.DebugLevel))
	a, cleanup, err := newApp(ctx, cfg, log, clock.Now)
	if err != nil {
		t.Fatalf("newApp: %v", err)
	}
	t.Cleanup(cleanup)
	srv := httptest.NewServer(a.handler)
	t.Cleanup(srv.Close)

	e := &env{t: t, URL: srv.URL, Pool: pool, Sim: sim, SimURL: simURL, Clock: clock, Keys: apikey.NewStore(pool, clock.Now), Logs: logs,
		Invalidations: make(chan bus.Invalidation, 64), NATS: ns, DatabaseURL: dbURL, Bus: cfg.NATS}

	nc, err := nats.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if _, err := bus.SubscribeInvalidations(nc, cfg.NATS, func(inv bus.Invalidation) { e.Invalidations <- inv }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	if err := pool.QueryRow(ctx, `INSERT INTO companies (slug, name, subscription_active, provisioned) VALUES ('acme', 'Acme Retail', true, true) RETURNING id`).
		Scan(&e.CompanyID); err != nil {
		t.Fatal(err)
	}
	users := accounts.NewStore(pool)
	if e.Admin, err = users.CreateUser(ctx, e.CompanyID, "ada@acme.example", testPassword, accounts.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	if e.Member, err = users.CreateUser(ctx, e.CompanyID, "max@acme.example", testPassword, accounts.RoleMember); err != nil {
		t.Fatal(err)
	}
	return e
}

// expectInvalidations waits for an invalidation of each key id.
func (e *env) expectInvalidations(keyIDs ...string) {
	e.t.Helper()
	want := map[string]bool{}
	for _, id := range keyIDs {
		want[id] = true
	}
	deadline := time.After(5 * time.Second)
	for len(want) > 0 {
		select {
		case inv := <-e.Invalidations:
			if inv.Kind != bus.KindAPIKey {
				e.t.Fatalf("invalidation of kind %q, want %q", inv.Kind, bus.KindAPIKey)
			}
			delete(want, inv.ID)
		case <-deadline:
			e.t.Fatalf("no invalidation received for keys %v", want)
		}
	}
}

// expectNoInvalidation checks that nothing was broadcast (give a broadcast
// that would be wrong a moment to arrive).
func (e *env) expectNoInvalidation() {
	e.t.Helper()
	select {
	case inv := <-e.Invalidations:
		e.t.Fatalf("unexpected invalidation %+v", inv)
	case <-time.After(200 * time.Millisecond):
	}
}

// browser is an HTTP client with a cookie jar that does not follow
// redirects, so tests see every 303.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func (e *env) browser() *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return &browser{t: e.t, base: e.URL, c: &http.Client{
		Jar:           jar,
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

type page struct {
	Status int
	Header http.Header
	Body   string
}

func (b *browser) do(req *http.Request) page {
	b.t.Helper()
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return page{Status: res.StatusCode, Header: res.Header, Body: string(body)}
}

func (b *browser) get(path string) page {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.base+path, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.do(req)
}

// post sends a form; headers are set on the request as given.
func (b *browser) post(path string, form url.Values, headers ...string) page {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return b.do(req)
}

func (b *browser) signIn(email, password string) page {
	b.t.Helper()
	return b.post("/login", url.Values{"email": {email}, "password": {password}})
}

// mustSignIn signs in and checks that it worked.
func (b *browser) mustSignIn(email string) {
	b.t.Helper()
	p := b.signIn(email, testPassword)
	if p.Status != http.StatusSeeOther {
		b.t.Fatalf("sign-in as %s: status %d\n%s", email, p.Status, p.Body)
	}
}

// cookie returns the value of the session cookie the jar holds.
func (b *browser) cookie(name string) string {
	u, _ := url.Parse(b.base)
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

var newKeyRe = regexp.MustCompile(`<code id="new-key"[^>]*>([^<]*)</code>`)

// newKeyOn returns the full key shown on a page, or "".
func newKeyOn(body string) string {
	m := newKeyRe.FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return m[1]
}

// keyAuthenticates is how the console and API tests decide whether a key
// would be let in: what the gateway decides from the database (parse, look
// up, compare the secret, check the state at now), at the test clock's now.
// The browser test asks a real gateway instead (gateway_test.go).
func keyAuthenticates(ctx context.Context, keys *apikey.Store, full string, now time.Time) (bool, error) {
	p, err := apikey.Parse(full)
	if err != nil {
		return false, err
	}
	k, err := keys.Lookup(ctx, p.KeyID)
	if err != nil {
		return false, err
	}
	return apikey.SecretMatches(p.Secret, k.SecretHash) && k.Accepts(now), nil
}

func (e *env) mustAuthenticate(full string, want bool) {
	e.t.Helper()
	ok, err := keyAuthenticates(context.Background(), e.Keys, full, e.Clock.Now())
	if err != nil {
		e.t.Fatalf("authenticate key: %v", err)
	}
	if ok != want {
		e.t.Fatalf("key %s…: authenticates = %v, want %v", full[:24], ok, want)
	}
}
