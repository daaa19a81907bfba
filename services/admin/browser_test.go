package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/parleyhq/parley/pkg/apikey"
)

// chromiumPath finds the browser, or skips (loudly) when there is none,
// unless PARLEY_REQUIRE_BROWSER=1 makes that a failure (CI sets it).
func chromiumPath(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv("PARLEY_CHROMIUM"), "/usr/bin/chromium", "chromium", "chromium-browser"}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	msg := "BROWSER TEST NOT RUN: no Chromium found (install it with `apt-get install -y chromium`, or set PARLEY_CHROMIUM)"
	if os.Getenv("PARLEY_REQUIRE_BROWSER") == "1" {
		t.Fatal(msg + "; PARLEY_REQUIRE_BROWSER=1 requires it")
	}
	fmt.Fprintln(os.Stderr, "!!! "+msg)
	t.Skip(msg)
	return ""
}

// screenshotDir is artifacts/screenshots at the repository root.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the test's directory")
		}
		dir = parent
	}
	out := filepath.Join(dir, "artifacts", "screenshots")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	return out
}

// chromiumTab starts a headless Chromium for the test and returns a tab;
// both end with the test.
func chromiumTab(t *testing.T, ctx context.Context, exe string) context.Context {
	t.Helper()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(exe),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 860),
	)
	tab, closeTab := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { closeTab(); cancelAlloc() })
	return tab
}

// browserRun is one test's headless Chromium tab with the steps the browser
// tests share; screenshots go to artifacts/screenshots as <prefix>-NN-<name>.png
// (the previous run's are removed first).
type browserRun struct {
	t      *testing.T
	tab    context.Context
	shots  string
	prefix string
	step   int
}

func newBrowserRun(t *testing.T, ctx context.Context, exe, prefix string) *browserRun {
	t.Helper()
	shots := screenshotDir(t)
	old, _ := filepath.Glob(filepath.Join(shots, prefix+"-*.png"))
	for _, f := range old {
		_ = os.Remove(f)
	}
	return &browserRun{t: t, tab: chromiumTab(t, ctx, exe), shots: shots, prefix: prefix}
}

// shot photographs the whole page as the next step.
func (b *browserRun) shot(name string) {
	b.t.Helper()
	b.step++
	png, err := chromedp.Run(b.tab, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(b.shots, fmt.Sprintf("%s-%02d-%s.png", b.prefix, b.step, name))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s", path)
}

func (b *browserRun) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.tab, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// submit clicks a button that sends a form and waits for the page it loads.
func (b *browserRun) submit(what string, sel chromedp.CSS, wantStatus int) {
	b.t.Helper()
	res, err := chromedp.RunResponse(b.tab, chromedp.Click(sel))
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	if int(res.Status) != wantStatus {
		b.t.Fatalf("%s: page status %d, want %d", what, res.Status, wantStatus)
	}
}

// text is the element's text without surrounding white space.
func (b *browserRun) text(sel chromedp.CSS) string {
	b.t.Helper()
	s, err := chromedp.Run(b.tab, chromedp.TextContent(sel))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

func (b *browserRun) count(sel string) int {
	b.t.Helper()
	n, err := chromedp.Run(b.tab, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
	if err != nil {
		b.t.Fatalf("count %s: %v", sel, err)
	}
	return n
}

// location is the path of the page the tab shows.
func (b *browserRun) location() string {
	b.t.Helper()
	p, err := chromedp.Run(b.tab, chromedp.Evaluate[string](`location.pathname`))
	if err != nil {
		b.t.Fatalf("location: %v", err)
	}
	return p
}

// fillSignIn opens the sign-in page at url and types the credentials.
func (b *browserRun) fillSignIn(url, email string) {
	b.t.Helper()
	b.do("open the console", chromedp.Navigate(url), chromedp.WaitVisible(chromedp.ID("email")))
	b.do("fill the sign-in form",
		chromedp.SendKeys(chromedp.ID("email"), email),
		chromedp.SendKeys(chromedp.ID("password"), testPassword))
}

// signIn signs in through the page at url.
func (b *browserRun) signIn(url, email string) {
	b.t.Helper()
	b.fillSignIn(url, email)
	b.submit("sign in", `button[type=submit]`, http.StatusOK)
}

// TestBrowserCredentials drives the console in headless Chromium as a
// customer would: an admin signs in, creates, copies, rotates and revokes
// the key; then a member finds nothing to press and a forged request is
// refused. Each step is checked through a real gateway (a campaign send with
// the key: 202 or 401), and photographed into artifacts/screenshots.
func TestBrowserCredentials(t *testing.T) {
	exe := chromiumPath(t)
	e := newEnv(t, nil)
	// The gateway checks grace periods on the real clock: the console's
	// starts there too, and only moves forward.
	e.Clock.Set(time.Now().UTC().Truncate(time.Second))
	gw := e.startGateway()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := newBrowserRun(t, ctx, exe, "credentials")
	tab, shot, do, submit, text, count := b.tab, b.shot, b.do, b.submit, b.text, b.count
	works := func(what, full string, want bool) {
		t.Helper()
		gw.expect(ctx, what, full, want)
	}
	signIn := func(email string) {
		t.Helper()
		b.fillSignIn(e.URL+"/", email)
	}

	// A mistyped password, then the admin signs in and finds no key.
	signIn("ada@acme.example")
	do("mistype the password", chromedp.SendKeys(chromedp.ID("password"), "typo"))
	submit("sign in with a wrong password", `button[type=submit]`, http.StatusUnauthorized)
	if msg := text(`.alert-error`); msg != "The email address or password is incorrect." {
		t.Fatalf("wrong password: %q", msg)
	}
	shot("sign-in-error")
	signIn("ada@acme.example")
	shot("sign-in")
	submit("sign in", `button[type=submit]`, http.StatusOK)
	do("lands on Sends", chromedp.WaitVisible(chromedp.ID("no-sends")))
	do("open Credentials from the sidebar", chromedp.Click(chromedp.CSS(`a.nav-item[href="`+credentialsPath+`"]`)),
		chromedp.WaitVisible(chromedp.ID("no-key")))
	shot("admin-no-key")

	// Create, and copy the key from the page.
	submit("create", `#create`, http.StatusOK)
	do("new key shown", chromedp.WaitVisible(chromedp.ID("new-key")))
	first := text(`#new-key`)
	if _, err := apikey.Parse(first); err != nil {
		t.Fatalf("the page shows %q as the new key: %v", first, err)
	}
	origin := strings.TrimSuffix(e.URL, "/")
	for _, name := range []string{"clipboard-read", "clipboard-write"} {
		if _, err := chromedp.CallBrowser(tab, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
			Permission: &cdpbrowser.PermissionDescriptor{Name: name}, Setting: cdpbrowser.PermissionSettingGranted, Origin: origin,
		}); err != nil {
			t.Fatalf("grant %s: %v", name, err)
		}
	}
	do("copy", chromedp.Click(chromedp.CSS(`button[data-copy-target="new-key"]`)))
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](`document.querySelector('button[data-copy-target="new-key"]').textContent === "Copied"`)); err != nil {
		t.Fatalf("the copy button did not say Copied: %v", err)
	}
	copied, err := chromedp.Run(tab, chromedp.Evaluate[string](`navigator.clipboard.readText()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("read the clipboard: %v", err)
	}
	if copied != first {
		t.Fatalf("the copy button copied %q, the page shows %q", copied, first)
	}
	shot("key-created")
	works("the created key", first, true)
	e.expectInvalidations(keyIDOf(t, first))

	do("leave the one-time page", chromedp.Click(chromedp.CSS(`#new-key-panel a.btn`)), chromedp.WaitVisible(chromedp.ID("active-key")))
	if n := count(`#new-key`); n != 0 {
		t.Fatal("the full key is still on the page after leaving it")
	}
	if masked := text(`#active-key .masked`); !strings.HasSuffix(masked, first[len(first)-4:]) || strings.Contains(masked, first[25:45]) {
		t.Fatalf("masked key %q", masked)
	}

	// Rotate: a new key at once, the previous one in its grace.
	e.Clock.Advance(2 * time.Hour)
	submit("rotate", `#rotate`, http.StatusOK)
	do("rotated key shown", chromedp.WaitVisible(chromedp.ID("new-key")))
	second := text(`#new-key`)
	if second == first {
		t.Fatal("rotation showed the same key")
	}
	shot("key-rotated")
	works("the new key after rotation", second, true)
	works("the previous key during its grace", first, true)
	e.expectInvalidations(keyIDOf(t, first), keyIDOf(t, second))

	e.Clock.Advance(48 * time.Minute)
	do("credentials page during the grace", chromedp.Navigate(e.URL+credentialsPath), chromedp.WaitVisible(chromedp.CSS(`.key.previous`)))
	if grace := text(`.key.previous .pill`); !strings.Contains(grace, "Expires in 23 h 12 m") {
		t.Fatalf("grace shown as %q", grace)
	}
	shot("rotation-grace")

	// Revoke, through the confirmation step.
	do("open the revoke confirmation", chromedp.Click(chromedp.ID("revoke-active")), chromedp.WaitVisible(chromedp.ID("confirm-revoke")))
	if warn := text(`.consequences`); !strings.Contains(warn, "Every integration and webhook that uses this key will fail") {
		t.Fatalf("confirmation says %q", warn)
	}
	works("the key while the confirmation is open", second, true)
	shot("revoke-confirm")
	submit("confirm revoke", `#confirm-revoke`, http.StatusOK)
	do("revoked", chromedp.WaitVisible(chromedp.ID("no-key")))
	if notice := text(`.alert-ok`); !strings.Contains(notice, "was revoked") {
		t.Fatalf("notice %q", notice)
	}
	shot("key-revoked")
	works("the revoked key", second, false)
	works("the previous key, still in its own grace", first, true)
	e.expectInvalidations(keyIDOf(t, second))

	// A member: the page, and nothing to press.
	submit("sign out", `.account button[type=submit]`, http.StatusOK)
	signIn("max@acme.example")
	submit("member sign-in", `button[type=submit]`, http.StatusOK)
	do("member lands on Sends", chromedp.WaitVisible(chromedp.ID("no-sends")))
	do("member page", chromedp.Navigate(e.URL+credentialsPath), chromedp.WaitVisible(chromedp.CSS(`.notice`)))
	shot("member-read-only")
	if n := count(`form[action^="/settings/"] button, a[href*="/revoke"], #create, #rotate`); n != 0 {
		t.Fatalf("a member's page has %d key actions", n)
	}
	status, err := chromedp.Run(tab, chromedp.Evaluate[int](fmt.Sprintf(`fetch(%q, {method: "POST", body: new URLSearchParams({confirm: "yes"})}).then(r => r.status)`,
		credentialsPath+"/keys/"+keyIDOf(t, first)+"/revoke"), chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusForbidden {
		t.Fatalf("a member's forged revoke: status %d, want 403", status)
	}
	status, err = chromedp.Run(tab, chromedp.Evaluate[int](fmt.Sprintf(`fetch(%q, {method: "POST"}).then(r => r.status)`,
		credentialsPath+"/create"), chromedp.EvalAwaitPromise))
	if err != nil || status != http.StatusForbidden {
		t.Fatalf("a member's forged create: status %d, %v; want 403", status, err)
	}
	res, err := chromedp.Run(tab, chromedp.NavigateResponse(e.URL+credentialsPath+"/keys/"+keyIDOf(t, first)+"/revoke"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != http.StatusForbidden {
		t.Fatalf("a member opening the revoke page: status %d, want 403", res.Status)
	}
	shot("member-forbidden")
	works("the previous key after the member's attempts", first, true)
	e.expectNoInvalidation()
}

func keyIDOf(t *testing.T, full string) string {
	t.Helper()
	p, err := apikey.Parse(full)
	if err != nil {
		t.Fatal(err)
	}
	return p.KeyID
}
