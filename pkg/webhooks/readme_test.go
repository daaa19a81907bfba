package webhooks_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/webhooks"
)

// docSnippets returns the openssl and Go verification examples of
// docs/webhooks.md's "Verifying an event", as written there.
func docSnippets(t *testing.T) (shell, goSrc string) {
	t.Helper()
	raw, err := os.ReadFile("../../docs/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "\n## Verifying an event\n")
	if start < 0 {
		t.Fatal(`docs/webhooks.md has no "## Verifying an event" section`)
	}
	section := doc[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	block := func(lang string) string {
		open := "\n```" + lang + "\n"
		i := strings.Index(section, open)
		if i < 0 {
			t.Fatalf("the documented verification section has no %s block", lang)
		}
		body := section[i+len(open):]
		j := strings.Index(body, "\n```")
		if j < 0 {
			t.Fatalf("unterminated %s block", lang)
		}
		return body[:j+1]
	}
	return block("sh"), block("go")
}

// signed is one event as Parley sends it.
type signed struct {
	id, ts, sig string
	body        []byte
}

func signEvent(t *testing.T, secrets ...string) signed {
	t.Helper()
	var keys [][]byte
	for _, s := range secrets {
		k, err := webhooks.ParseSecret(s)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	now := time.Now()
	body, err := webhooks.MarshalBody("message.failed", now, webhooks.SampleData("message.failed", now))
	if err != nil {
		t.Fatal(err)
	}
	id := "0193a5c4-8a21-7d3e-9f10-2c4b6d8e0f12"
	return signed{id: id, ts: strconv.FormatInt(now.Unix(), 10), sig: webhooks.Sign(keys, id, now, body), body: body}
}

func newSecrets(t *testing.T) (string, string) {
	a, err := webhooks.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, err := webhooks.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}

type verifyCase struct {
	name   string
	secret string
	ev     signed
	wantOK bool
}

func verifyCases(t *testing.T) []verifyCase {
	current, previous := newSecrets(t)
	one := signEvent(t, current)
	both := signEvent(t, current, previous)
	tampered := one
	tampered.body = []byte(strings.Replace(string(one.body), "failed", "delivered", 1))
	stale := one
	stale.ts = strconv.FormatInt(time.Now().Add(-10*time.Minute).Unix(), 10)
	return []verifyCase{
		{"one secret", current, one, true},
		{"rotation, current secret", current, both, true},
		{"rotation, previous secret", previous, both, true},
		{"other secret", previous, one, false},
		{"changed body", current, tampered, false},
		{"old timestamp", current, stale, false},
	}
}

func TestDocumentedVerificationSnippets(t *testing.T) {
	shell, goSrc := docSnippets(t)

	t.Run("openssl", func(t *testing.T) {
		if _, err := exec.LookPath("openssl"); err != nil {
			t.Skip("openssl is not installed")
		}
		for _, c := range verifyCases(t) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "body.json"), c.ev.body, 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("bash", "-c", shell)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "WEBHOOK_SECRET="+c.secret, "WEBHOOK_ID="+c.ev.id,
				"WEBHOOK_TIMESTAMP="+c.ev.ts, "WEBHOOK_SIGNATURE="+c.ev.sig)
			out, err := cmd.CombinedOutput()
			if ok := err == nil && strings.Contains(string(out), "signature valid"); ok != c.wantOK {
				t.Errorf("%s: accepted %v, want %v (%v)\n%s", c.name, ok, c.wantOK, err, out)
			}
		}
	})

	t.Run("go", func(t *testing.T) {
		goBin, err := exec.LookPath("go")
		if err != nil {
			t.Skip("no go toolchain")
		}
		dir := t.TempDir()
		harness := `package main

import (
	"fmt"
	"net/http"
	"os"
	"time"
)

func main() {
	h := http.Header{}
	h.Set("webhook-id", os.Getenv("WEBHOOK_ID"))
	h.Set("webhook-timestamp", os.Getenv("WEBHOOK_TIMESTAMP"))
	h.Set("webhook-signature", os.Getenv("WEBHOOK_SIGNATURE"))
	body, err := os.ReadFile(os.Getenv("WEBHOOK_BODY"))
	if err != nil {
		panic(err)
	}
	if err := verifyWebhook(os.Getenv("WEBHOOK_SECRET"), h, body, time.Now()); err != nil {
		fmt.Println("refused:", err)
		os.Exit(1)
	}
	fmt.Println("signature valid")
}
`
		for name, content := range map[string]string{"go.mod": "module readmecheck\n\ngo 1.22\n", "verify.go": goSrc, "main.go": harness} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		build := exec.Command(goBin, "build", "-o", "verify", ".")
		build.Dir = dir
		build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("the documented Go snippet does not build: %v\n%s", err, out)
		}
		for _, c := range verifyCases(t) {
			bodyPath := filepath.Join(t.TempDir(), "body.json")
			if err := os.WriteFile(bodyPath, c.ev.body, 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(filepath.Join(dir, "verify"))
			cmd.Env = append(os.Environ(), "WEBHOOK_SECRET="+c.secret, "WEBHOOK_ID="+c.ev.id,
				"WEBHOOK_TIMESTAMP="+c.ev.ts, "WEBHOOK_SIGNATURE="+c.ev.sig, "WEBHOOK_BODY="+bodyPath)
			out, err := cmd.CombinedOutput()
			if ok := err == nil && strings.Contains(string(out), "signature valid"); ok != c.wantOK {
				t.Errorf("%s: accepted %v, want %v (%v)\n%s", c.name, ok, c.wantOK, err, out)
			}
		}
	})
}
