package main

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/apikey"
	"github.com/parleyhq/parley/services/admin/internal/config"
)

const credentialsPath = "/settings/integrations/credentials"

func TestSignIn(t *testing.T) {
	e := newEnv(t, nil)
	b := e.browser()

	p := b.get(credentialsPath)
	if p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/login" {
		t.Fatalf("signed out, credentials page: %d to %q, want 303 to /login", p.Status, p.Header.Get("Location"))
	}
	if p := b.get("/login"); p.Status != http.StatusOK || !strings.Contains(p.Body, `name="password"`) {
		t.Fatalf("sign-in page: %d", p.Status)
	}

	t.Run("wrong password and unknown email get the same answer", func(t *testing.T) {
		for _, email := range []string{"ada@acme.example", "nobody@acme.example"} {
			p := b.signIn(email, "not the password at all")
			if p.Status != http.StatusUnauthorized || !strings.Contains(p.Body, "The email address or password is incorrect.") {
				t.Fatalf("%s: status %d", email, p.Status)
			}
			if b.cookie("parley_session") != "" && b.get(credentialsPath).Status != http.StatusSeeOther {
				t.Fatal("a failed sign-in signed in")
			}
		}
		if p := b.signIn("", ""); p.Status != http.StatusUnprocessableEntity {
			t.Fatalf("empty form: status %d", p.Status)
		}
	})

	t.Run("success", func(t *testing.T) {
		p := b.signIn("ADA@acme.example", testPassword)
		if p.Status != http.StatusSeeOther || p.Header.Get("Location") != credentialsPath {
			t.Fatalf("sign-in: %d to %q", p.Status, p.Header.Get("Location"))
		}
		set := p.Header.Get("Set-Cookie")
		for _, attr := range []string{"parley_session=", "HttpOnly", "SameSite=Lax", "Path=/"} {
			if !strings.Contains(set, attr) {
				t.Errorf("session cookie %q lacks %s", set, attr)
			}
		}
		if strings.Contains(set, "Secure") {
			t.Errorf("cookie %q is Secure although PARLEY_ADMIN_COOKIE_SECURE is off", set)
		}
		page := b.get(credentialsPath)
		if page.Status != http.StatusOK || !strings.Contains(page.Body, "ada@acme.example") || !strings.Contains(page.Body, "Acme Retail") {
			t.Fatalf("credentials page after sign-in: %d", page.Status)
		}
		if cc := page.Header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("Cache-Control %q, want no-store", cc)
		}
		if csp := page.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("Content-Security-Policy %q", csp)
		}
	})

	t.Run("sign out ends the session", func(t *testing.T) {
		token := b.cookie("parley_session")
		p := b.post("/logout", nil)
		if p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/login" {
			t.Fatalf("sign-out: %d to %q", p.Status, p.Header.Get("Location"))
		}
		if p := b.get("/login"); !strings.Contains(p.Body, "You have signed out.") {
			t.Fatal("no signed-out notice")
		}
		replay := e.browser()
		replay.c.Jar.SetCookies(mustURL(t, e.URL), []*http.Cookie{{Name: "parley_session", Value: token}})
		if p := replay.get(credentialsPath); p.Status != http.StatusSeeOther {
			t.Fatalf("the signed-out token still opens the page: %d", p.Status)
		}
	})
}

func TestSecureCookie(t *testing.T) {
	e := newEnv(t, func(c *config.Config) { c.Console.CookieSecure = true })
	p := e.browser().signIn("ada@acme.example", testPassword)
	set := p.Header.Get("Set-Cookie")
	if p.Status != http.StatusSeeOther || !strings.HasPrefix(set, "__Host-parley_session=") || !strings.Contains(set, "; Secure") {
		t.Fatalf("status %d, Set-Cookie %q: want a Secure __Host- cookie", p.Status, set)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// A session token that exists before sign-in (planted by an attacker, or
// the visitor's own) is replaced at sign-in and is worth nothing after.
func TestSignInRenewsSessionToken(t *testing.T) {
	e := newEnv(t, nil)
	b := e.browser()
	b.get(credentialsPath) // remembers where to return: a session before sign-in
	before := b.cookie("parley_session")
	if before == "" {
		t.Fatal("no session cookie before sign-in")
	}
	p := b.signIn("ada@acme.example", testPassword)
	if p.Status != http.StatusSeeOther || p.Header.Get("Location") != credentialsPath {
		t.Fatalf("sign-in: %d to %q, want back to the page asked for", p.Status, p.Header.Get("Location"))
	}
	after := b.cookie("parley_session")
	if after == "" || after == before {
		t.Fatalf("token not renewed at sign-in: before %q, after %q", before, after)
	}
	if p := b.get(credentialsPath); p.Status != http.StatusOK {
		t.Fatalf("new token: %d", p.Status)
	}
	planted := e.browser()
	planted.c.Jar.SetCookies(mustURL(t, e.URL), []*http.Cookie{{Name: "parley_session", Value: before}})
	if p := planted.get(credentialsPath); p.Status != http.StatusSeeOther {
		t.Fatalf("the pre-sign-in token is signed in: %d", p.Status)
	}
	var stored int
	if err := e.Pool.QueryRow(context.Background(), `SELECT count(*) FROM sessions WHERE token IN ($1, $2)`, before, after).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 0 {
		t.Fatal("session tokens are stored in the clear (want only their hashes)")
	}
}

func TestSignInThrottle(t *testing.T) {
	e := newEnv(t, func(c *config.Config) {
		c.Console.LoginMaxFailuresPerEmail = 3
		c.Console.LoginMaxFailuresPerIP = 5
		c.Console.LoginFailureWindow = 10 * time.Minute
		c.Console.TrustForwardedFor = true
	})
	b := e.browser()
	from := func(ip, email, password string) page {
		return b.post("/login", url.Values{"email": {email}, "password": {password}}, "X-Forwarded-For", "10.9.9.9, "+ip)
	}

	t.Run("per email", func(t *testing.T) {
		for i := range 3 {
			if p := from("198.51.100.1", "ada@acme.example", "guess number "+string(rune('a'+i))+"!!!"); p.Status != http.StatusUnauthorized {
				t.Fatalf("failure %d: status %d", i+1, p.Status)
			}
		}
		// The right password from another network changes nothing now.
		p := from("198.51.100.2", "ada@acme.example", testPassword)
		if p.Status != http.StatusTooManyRequests || p.Header.Get("Retry-After") != "600" ||
			!strings.Contains(p.Body, "try again in 10 minutes") {
			t.Fatalf("after 3 failures: status %d, Retry-After %q", p.Status, p.Header.Get("Retry-After"))
		}
		if p := from("198.51.100.2", "max@acme.example", testPassword); p.Status != http.StatusSeeOther {
			t.Fatalf("another account is throttled: %d", p.Status)
		}
		e.Clock.Advance(10 * time.Minute)
		if p := from("198.51.100.2", "ada@acme.example", testPassword); p.Status != http.StatusSeeOther {
			t.Fatalf("after the window: status %d", p.Status)
		}
	})

	t.Run("per client network", func(t *testing.T) {
		e.Clock.Advance(time.Hour)
		for i, email := range []string{"a@x.example", "b@x.example", "c@x.example", "d@x.example", "e@x.example"} {
			if p := from("203.0.113.9", email, "some guess here"); p.Status != http.StatusUnauthorized {
				t.Fatalf("failure %d: status %d", i+1, p.Status)
			}
		}
		if p := from("203.0.113.9", "max@acme.example", testPassword); p.Status != http.StatusTooManyRequests {
			t.Fatalf("6th sign-in from a guessing network: status %d, want 429", p.Status)
		}
		if p := from("203.0.113.10", "max@acme.example", testPassword); p.Status != http.StatusSeeOther {
			t.Fatalf("another network: status %d", p.Status)
		}
	})
}

func TestCrossOriginFormsAreRefused(t *testing.T) {
	e := newEnv(t, nil)
	b := e.browser()
	b.mustSignIn("ada@acme.example")
	forged := [][]string{
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site"},
		{"Origin", "https://evil.example"},
	}
	for _, h := range forged {
		p := b.post(credentialsPath+"/create", nil, h...)
		if p.Status != http.StatusForbidden || !strings.Contains(p.Body, "Request blocked") {
			t.Fatalf("create with %s: %s: status %d, want 403", h[0], h[1], p.Status)
		}
		p = b.post("/login", url.Values{"email": {"ada@acme.example"}, "password": {testPassword}}, h...)
		if p.Status != http.StatusForbidden {
			t.Fatalf("sign-in with %s: %s: status %d, want 403", h[0], h[1], p.Status)
		}
		if p := b.post("/logout", nil, h...); p.Status != http.StatusForbidden {
			t.Fatalf("sign-out with %s: %s: status %d, want 403", h[0], h[1], p.Status)
		}
	}
	keys, err := e.Keys.List(context.Background(), e.CompanyID)
	if err != nil || len(keys) != 0 {
		t.Fatalf("forged requests made keys: %v, %v", keys, err)
	}
	e.expectNoInvalidation()
	// The same request from the console's own page goes through.
	p := b.post(credentialsPath+"/create", nil, "Sec-Fetch-Site", "same-origin", "Origin", e.URL)
	if p.Status != http.StatusOK || newKeyOn(p.Body) == "" {
		t.Fatalf("same-origin create: status %d", p.Status)
	}
}

func TestMemberIsReadOnly(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	b := e.browser()
	b.mustSignIn("max@acme.example")

	// No key yet: nothing to create from a member's page.
	p := b.get(credentialsPath)
	if p.Status != http.StatusOK || !strings.Contains(p.Body, "No active API key") || !strings.Contains(p.Body, "read-only access") {
		t.Fatalf("member page without a key: %d", p.Status)
	}
	if strings.Contains(p.Body, credentialsPath+"/create") {
		t.Fatal("member sees the create form")
	}
	if p := b.post(credentialsPath+"/create", nil); p.Status != http.StatusForbidden {
		t.Fatalf("member create: %d, want 403", p.Status)
	}

	full, key, err := e.Keys.Create(ctx, e.CompanyID, apikey.Actor{Label: "test"})
	if err != nil {
		t.Fatal(err)
	}
	p = b.get(credentialsPath)
	if !strings.Contains(p.Body, key.Masked()) || !strings.Contains(p.Body, "Activity") {
		t.Fatal("member does not see the masked key and the activity")
	}
	for _, action := range []string{"/create", "/rotate", "/keys/" + key.KeyID + "/revoke"} {
		if strings.Contains(p.Body, credentialsPath+action) {
			t.Errorf("member page offers %s", action)
		}
	}
	actions := []struct {
		method, path string
		form         url.Values
	}{
		{http.MethodPost, "/create", nil},
		{http.MethodPost, "/rotate", url.Values{"key_id": {key.KeyID}}},
		{http.MethodGet, "/keys/" + key.KeyID + "/revoke", nil},
		{http.MethodPost, "/keys/" + key.KeyID + "/revoke", url.Values{"confirm": {"yes"}}},
	}
	for _, a := range actions {
		var p page
		if a.method == http.MethodGet {
			p = b.get(credentialsPath + a.path)
		} else {
			p = b.post(credentialsPath+a.path, a.form)
		}
		if p.Status != http.StatusForbidden || !strings.Contains(p.Body, "Only admins can do this") {
			t.Errorf("member %s %s: status %d, want 403", a.method, a.path, p.Status)
		}
	}
	keys, err := e.Keys.List(ctx, e.CompanyID)
	if err != nil || len(keys) != 1 || keys[0].State != apikey.StateActive {
		t.Fatalf("keys after a member's attempts: %+v, %v", keys, err)
	}
	e.mustAuthenticate(full, true)
	events, err := e.Keys.Events(ctx, e.CompanyID, 10)
	if err != nil || len(events) != 1 {
		t.Fatalf("events after a member's attempts: %+v, %v", events, err)
	}
	e.expectNoInvalidation()
}

func TestAdminKeyLifecycle(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	b := e.browser()
	b.mustSignIn("ada@acme.example")

	p := b.get(credentialsPath)
	if !strings.Contains(p.Body, "No active API key") || !strings.Contains(p.Body, credentialsPath+"/create") {
		t.Fatal("admin without a key is not offered to create one")
	}

	// Create: the full key is in this response and nowhere else.
	p = b.post(credentialsPath+"/create", nil)
	first := newKeyOn(p.Body)
	if p.Status != http.StatusOK || first == "" || !strings.Contains(p.Body, "will not be shown again") {
		t.Fatalf("create: status %d, key %q", p.Status, first)
	}
	parsed, err := apikey.Parse(first)
	if err != nil {
		t.Fatalf("the page shows %q: %v", first, err)
	}
	e.mustAuthenticate(first, true)
	e.expectInvalidations(parsed.KeyID)

	p = b.get(credentialsPath)
	if newKeyOn(p.Body) != "" || strings.Contains(p.Body, parsed.Secret[:20]) {
		t.Fatal("the full key is shown again after the create response")
	}
	if !strings.Contains(p.Body, apikey.Mask(parsed.KeyID, apikey.Hint(parsed.Secret))) || !strings.Contains(p.Body, "Never") {
		t.Fatal("the page lacks the masked key or its last use")
	}
	if strings.Contains(p.Body, credentialsPath+"/create") {
		t.Fatal("create offered while a key is active")
	}
	if p := b.post(credentialsPath+"/create", nil); p.Status != http.StatusSeeOther {
		t.Fatalf("second create: %d, want 303 back with a notice", p.Status)
	}
	if p := b.get(credentialsPath); !strings.Contains(p.Body, "already has an active API key") {
		t.Fatal("second create: no notice")
	}

	// Rotate: a new key, the previous one in its grace, both broadcast.
	e.Clock.Advance(time.Hour)
	p = b.post(credentialsPath+"/rotate", url.Values{"key_id": {parsed.KeyID}})
	second := newKeyOn(p.Body)
	if p.Status != http.StatusOK || second == "" || second == first {
		t.Fatalf("rotate: status %d, key %q", p.Status, second)
	}
	rotated, _ := apikey.Parse(second)
	e.expectInvalidations(rotated.KeyID, parsed.KeyID)
	e.mustAuthenticate(second, true)
	e.mustAuthenticate(first, true)
	if !strings.Contains(p.Body, "keeps working until 3 Jun 2025, 10:30 UTC") {
		t.Fatal("rotate response does not say until when the previous key works")
	}

	e.Clock.Advance(48 * time.Minute)
	p = b.get(credentialsPath)
	if !strings.Contains(p.Body, "Expires in 23 h 12 m") {
		t.Fatal("the previous key's remaining grace is not shown as 23 h 12 m")
	}
	// The same rotate form sent again changes nothing.
	if p := b.post(credentialsPath+"/rotate", url.Values{"key_id": {parsed.KeyID}}); p.Status != http.StatusSeeOther || newKeyOn(p.Body) != "" {
		t.Fatalf("resubmitted rotate: status %d", p.Status)
	}
	if p := b.get(credentialsPath); !strings.Contains(p.Body, "already changed") {
		t.Fatal("resubmitted rotate: no notice")
	}
	e.expectNoInvalidation()

	// Revoke asks first, and says what breaks.
	revokePath := credentialsPath + "/keys/" + rotated.KeyID + "/revoke"
	if p := b.post(revokePath, nil); p.Status != http.StatusSeeOther || p.Header.Get("Location") != revokePath {
		t.Fatalf("revoke without confirmation: %d to %q, want the confirmation page", p.Status, p.Header.Get("Location"))
	}
	e.mustAuthenticate(second, true)
	p = b.get(revokePath)
	for _, text := range []string{"stops working immediately", "Every integration and webhook that uses this key will fail", "cannot be undone"} {
		if !strings.Contains(p.Body, text) {
			t.Errorf("confirmation page lacks %q", text)
		}
	}
	p = b.post(revokePath, url.Values{"confirm": {"yes"}})
	if p.Status != http.StatusSeeOther {
		t.Fatalf("confirmed revoke: %d", p.Status)
	}
	e.expectInvalidations(rotated.KeyID)
	e.mustAuthenticate(second, false)
	e.mustAuthenticate(first, true) // the previous key's grace is its own
	p = b.get(credentialsPath)
	if !strings.Contains(p.Body, "was revoked") || !strings.Contains(p.Body, "No active API key") {
		t.Fatal("after revoke: no notice, or a key still shown as active")
	}
	if p := b.post(revokePath, url.Values{"confirm": {"yes"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("revoking twice: %d", p.Status)
	}
	if p := b.get(credentialsPath); !strings.Contains(p.Body, "already revoked") {
		t.Fatal("revoking twice: no notice")
	}
	if p := b.post(credentialsPath+"/keys/nosuchkey0000000/revoke", url.Values{"confirm": {"yes"}}); p.Status != http.StatusNotFound {
		t.Fatalf("revoking an unknown key: %d", p.Status)
	}
	e.expectNoInvalidation()
	events, err := e.Keys.Events(ctx, e.CompanyID, 10)
	if err != nil {
		t.Fatal(err)
	}
	var trail []string
	for _, ev := range events {
		trail = append(trail, ev.Action+" "+ev.KeyID+" by "+ev.Actor)
		if !strings.Contains(p.Body, ev.KeyID) {
			t.Errorf("audit entry for %s not on the page", ev.KeyID)
		}
	}
	want := []string{
		"revoke " + rotated.KeyID + " by ada@acme.example",
		"rotate " + rotated.KeyID + " by ada@acme.example",
		"create " + parsed.KeyID + " by ada@acme.example",
	}
	if strings.Join(trail, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit trail:\n%s\nwant:\n%s", strings.Join(trail, "\n"), strings.Join(want, "\n"))
	}
	for _, label := range []string{"Created", "Rotated (new key)", "Revoked"} {
		if !strings.Contains(p.Body, label) {
			t.Errorf("activity lacks %q", label)
		}
	}

	// The previous key's grace runs out on the clock of the app.
	e.Clock.Advance(23*time.Hour + 12*time.Minute)
	e.mustAuthenticate(first, false)
	if p := b.get(credentialsPath); strings.Contains(p.Body, "Previous key") {
		t.Fatal("an expired previous key is still listed")
	}

	// Never in the session store, never in the logs.
	rows, err := e.Pool.Query(ctx, `SELECT data FROM sessions`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{first, second} {
			if strings.Contains(string(data), k[len(k)-38:]) {
				t.Fatal("a key's secret is stored in a session")
			}
		}
	}
	logs := e.Logs.String()
	for _, secret := range []string{first[len(first)-38:], second[len(second)-38:], testPassword} {
		if strings.Contains(logs, secret) {
			t.Fatal("a secret was logged")
		}
	}
	if !strings.Contains(logs, `"msg":"API key rotated"`) {
		t.Fatal("key actions are not logged at all")
	}
}

func TestRevokePreviousKeyDuringGrace(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	first, key, err := e.Keys.Create(ctx, e.CompanyID, apikey.Actor{Label: "test"})
	if err != nil {
		t.Fatal(err)
	}
	second, _, _, err := e.Keys.Rotate(ctx, e.CompanyID, apikey.Actor{Label: "test"})
	if err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.mustSignIn("ada@acme.example")
	p := b.get(credentialsPath)
	revokePath := credentialsPath + "/keys/" + key.KeyID + "/revoke"
	if !strings.Contains(p.Body, revokePath) || !strings.Contains(p.Body, "Expires in 24 h 0 m") {
		t.Fatal("the previous key in its grace is not offered for revocation")
	}
	if p := b.get(revokePath); !strings.Contains(p.Body, "Your active key is not affected") {
		t.Fatal("confirmation for a previous key does not say the active key stays")
	}
	if p := b.post(revokePath, url.Values{"confirm": {"yes"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("revoke previous: %d", p.Status)
	}
	e.expectInvalidations(key.KeyID)
	e.mustAuthenticate(first, false)
	e.mustAuthenticate(second, true)
}

// Signed in, admin or member, the console opens on Sends: straight from the
// sign-in page, from /, and from a sign-in page visited while signed in.
func TestSignInLandsOnSends(t *testing.T) {
	e := newEnv(t, nil)
	for _, email := range []string{"ada@acme.example", "max@acme.example"} {
		t.Run(email, func(t *testing.T) {
			b := e.browser()
			if p := b.signIn(email, testPassword); p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/sends" {
				t.Fatalf("sign-in: %d to %q, want 303 to /sends", p.Status, p.Header.Get("Location"))
			}
			for _, path := range []string{"/", "/login"} {
				if p := b.get(path); p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/sends" {
					t.Errorf("signed in, %s: %d to %q, want 303 to /sends", path, p.Status, p.Header.Get("Location"))
				}
			}
			if p := b.get("/sends"); p.Status != http.StatusOK || !strings.Contains(p.Body, `id="no-sends"`) {
				t.Fatalf("Sends: %d", p.Status)
			}
		})
	}
}
