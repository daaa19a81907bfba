package main

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/pkg/webhooks"
	"github.com/parleyhq/parley/services/admin/internal/config"
)

const webhooksPath = "/settings/integrations/webhooks"

var newSecretRe = regexp.MustCompile(`<code id="new-secret"[^>]*>([^<]*)</code>`)

func newSecretOn(body string) string {
	m := newSecretRe.FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return m[1]
}

func (e *env) webhookStore() *webhooks.Store {
	box, err := secretbox.New(secretbox.DevKey)
	if err != nil {
		e.t.Fatal(err)
	}
	return webhooks.NewStore(e.Pool, box, webhooks.DefaultConfig())
}

// endpointRow is the database's view of the company's one endpoint.
func (e *env) onlyEndpoint(t *testing.T) webhooks.Endpoint {
	t.Helper()
	eps, err := e.webhookStore().List(context.Background(), e.CompanyID)
	if err != nil || len(eps) != 1 {
		t.Fatalf("%d endpoints, %v; want 1", len(eps), err)
	}
	return eps[0]
}

func TestConsoleWebhooks(t *testing.T) {
	e := newEnv(t, func(c *config.Config) { c.Webhooks.MaxEndpoints = 2 })
	admin := e.browser()
	admin.mustSignIn("ada@acme.example")

	p := admin.get(webhooksPath)
	if p.Status != 200 || !strings.Contains(p.Body, `id="no-endpoints"`) || !strings.Contains(p.Body, `id="create-endpoint"`) ||
		!strings.Contains(p.Body, `aria-current="page" href="/settings/integrations/webhooks"`) {
		t.Fatalf("empty webhooks page: %d\n%s", p.Status, p.Body)
	}

	t.Run("bad input is a 422 with the fields' errors, nothing created", func(t *testing.T) {
		for _, tc := range []struct {
			form url.Values
			want string
		}{
			{url.Values{"url": {""}}, "url is required"},
			{url.Values{"url": {"http://93.184.215.14/"}}, "url must use https"},
			{url.Values{"url": {"https://127.0.0.1/"}}, "loopback"},
			{url.Values{"url": {"https://169.254.169.254/"}}, "link-local"},
			{url.Values{"url": {"https://93.184.215.14/" + strings.Repeat("a", 2048)}}, "the limit is 2048"},
			{url.Values{"url": {"https://93.184.215.14/"}, "event_types": {"message.exploded"}}, "unknown event type"},
		} {
			p := admin.post(webhooksPath+"/create", tc.form)
			if p.Status != http.StatusUnprocessableEntity || !strings.Contains(html.UnescapeString(p.Body), tc.want) {
				t.Errorf("create %v: %d, want 422 saying %q", tc.form, p.Status, tc.want)
			}
			if newSecretOn(p.Body) != "" {
				t.Errorf("create %v showed a secret", tc.form)
			}
		}
		var n int
		_ = e.Pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_endpoints`).Scan(&n)
		if n != 0 {
			t.Fatalf("%d endpoints after refused forms", n)
		}
	})

	p = admin.post(webhooksPath+"/create", url.Values{"url": {"https://93.184.215.14/hooks"}, "description": {"CRM"},
		"event_types": {"message.failed", "batch.completed"}, "enabled": {"on"}})
	secret := newSecretOn(p.Body)
	if p.Status != 200 || !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("create: %d\n%s", p.Status, p.Body)
	}
	ep := e.onlyEndpoint(t)
	if ep.URL != "https://93.184.215.14/hooks" || ep.Description != "CRM" || !ep.Enabled || strings.Join(ep.EventTypes, ",") != "message.failed,batch.completed" {
		t.Fatalf("created endpoint = %+v", ep)
	}
	if strings.Contains(e.Logs.String(), strings.TrimPrefix(secret, "whsec_")) {
		t.Fatal("the secret was logged")
	}
	// Shown once: the list and the endpoint's page never show it again.
	list := admin.get(webhooksPath)
	detail := admin.get(webhooksPath + "/" + ep.ID)
	for _, pg := range []page{list, detail} {
		if pg.Status != 200 || strings.Contains(pg.Body, secret) {
			t.Fatalf("page %d shows the secret again", pg.Status)
		}
	}
	if !strings.Contains(list.Body, "https://93.184.215.14/hooks") || !strings.Contains(html.UnescapeString(detail.Body), "whsec_…"+ep.SecretHint) ||
		!strings.Contains(detail.Body, `id="no-attempts"`) {
		t.Fatalf("list or detail misses the endpoint:\n%s", detail.Body)
	}

	t.Run("edit: bad input changes nothing; good input saves", func(t *testing.T) {
		p := admin.post(webhooksPath+"/"+ep.ID+"/update", url.Values{"url": {"ftp://x/"}, "description": {"changed"}})
		if p.Status != http.StatusUnprocessableEntity || !strings.Contains(p.Body, "absolute https") {
			t.Fatalf("bad update: %d", p.Status)
		}
		if got := e.onlyEndpoint(t); got.Description != "CRM" || got.URL != ep.URL {
			t.Fatalf("a refused edit changed the endpoint: %+v", got)
		}
		p = admin.post(webhooksPath+"/"+ep.ID+"/update", url.Values{"url": {"https://93.184.215.14/v2"}, "description": {"Shop"}, "enabled": {"on"}})
		if p.Status != http.StatusSeeOther {
			t.Fatalf("update: %d\n%s", p.Status, p.Body)
		}
		if got := e.onlyEndpoint(t); got.URL != "https://93.184.215.14/v2" || got.Description != "Shop" || len(got.EventTypes) != 0 || !got.Enabled {
			t.Fatalf("updated endpoint = %+v", got)
		}
		if p := admin.get(webhooksPath + "/" + ep.ID); !strings.Contains(p.Body, "The endpoint was saved.") {
			t.Fatal("no saved notice")
		}
	})

	t.Run("rotate shows the new secret once; both sign for 24 hours", func(t *testing.T) {
		p := admin.post(webhooksPath+"/"+ep.ID+"/rotate", nil)
		rotated := newSecretOn(p.Body)
		if p.Status != 200 || !strings.HasPrefix(rotated, "whsec_") || rotated == secret || !strings.Contains(p.Body, "24 hours") {
			t.Fatalf("rotate: %d", p.Status)
		}
		keys, err := e.webhookStore().ActiveSecrets(context.Background(), ep.ID, e.Clock.Now())
		if err != nil || len(keys) != 2 {
			t.Fatalf("%d active secrets, %v", len(keys), err)
		}
	})

	t.Run("test event, attempts, disabled notice, enable, replay", func(t *testing.T) {
		if p := admin.post(webhooksPath+"/"+ep.ID+"/test", url.Values{"event_type": {"nope.nope"}}); p.Status != http.StatusUnprocessableEntity {
			t.Fatalf("test with a bad type: %d", p.Status)
		}
		p := admin.post(webhooksPath+"/"+ep.ID+"/test", url.Values{"event_type": {"webhook.test"}})
		if p.Status != http.StatusSeeOther {
			t.Fatalf("test: %d\n%s", p.Status, p.Body)
		}
		s := e.webhookStore()
		ds, err := s.Deliveries(context.Background(), e.CompanyID, ep.ID, webhooks.StatusPending, 10)
		if err != nil || len(ds) != 1 || ds[0].EventType != "webhook.test" {
			t.Fatalf("pending deliveries = %+v, %v", ds, err)
		}
		// The sender fails to deliver it, gives up and disables the endpoint.
		code := 502
		if err := s.RecordAttempt(context.Background(), webhooks.AttemptResult{DeliveryID: ds[0].ID, ResponseCode: &code,
			Latency: 87 * time.Millisecond, Excerpt: "<html>Bad gateway</html>", At: e.Clock.Now()}); err != nil {
			t.Fatal(err)
		}
		if err := s.Disable(context.Background(), ep.ID, "every delivery failed for 3 days", ""); err != nil {
			t.Fatal(err)
		}
		p = admin.get(webhooksPath + "/" + ep.ID)
		for _, want := range []string{`id="disabled-notice"`, "every delivery failed for 3 days", "HTTP 502: &lt;html&gt;Bad gateway&lt;/html&gt;",
			"87 ms", "502", "webhook.test", `id="enable"`} {
			if !strings.Contains(p.Body, want) {
				t.Errorf("endpoint page lacks %q", want)
			}
		}
		if p := admin.get(webhooksPath); !strings.Contains(p.Body, "Disabled") {
			t.Error("the list does not say the endpoint is disabled")
		}
		if p := admin.post(webhooksPath+"/"+ep.ID+"/test", nil); p.Status != http.StatusConflict {
			t.Errorf("test event to a disabled endpoint: %d", p.Status)
		}
		if p := admin.post(webhooksPath+"/"+ep.ID+"/enable", nil); p.Status != http.StatusSeeOther {
			t.Fatalf("enable: %d", p.Status)
		}
		if got := e.onlyEndpoint(t); !got.Enabled || got.DisabledReason != "" {
			t.Fatalf("after enable: %+v", got)
		}

		for _, bad := range []url.Values{{"from": {"yesterday"}, "to": {"2025-06-02T10:00"}},
			{"from": {"2025-06-02T10:00"}, "to": {"2025-06-02T09:00"}}} {
			if p := admin.post(webhooksPath+"/"+ep.ID+"/replay", bad); p.Status != http.StatusUnprocessableEntity {
				t.Errorf("replay %v: %d", bad, p.Status)
			}
		}
		if ds, _ := s.Deliveries(context.Background(), e.CompanyID, ep.ID, webhooks.StatusFailed, 10); len(ds) != 1 {
			t.Fatalf("a refused replay changed the deliveries: %d failed", len(ds))
		}
		now := e.Clock.Now().UTC()
		p = admin.post(webhooksPath+"/"+ep.ID+"/replay", url.Values{"from": {now.Add(-time.Hour).Format("2006-01-02T15:04")},
			"to": {now.Add(time.Hour).Format("2006-01-02T15:04")}})
		if p.Status != http.StatusSeeOther {
			t.Fatalf("replay: %d", p.Status)
		}
		if p := admin.get(webhooksPath + "/" + ep.ID); !strings.Contains(p.Body, "1 failed delivery was queued") {
			t.Error("no replay notice")
		}
		if ds, _ := s.Deliveries(context.Background(), e.CompanyID, ep.ID, webhooks.StatusPending, 10); len(ds) != 1 {
			t.Fatalf("after replay %d pending", len(ds))
		}
	})

	t.Run("members read only, enforced on the server", func(t *testing.T) {
		member := e.browser()
		member.mustSignIn("max@acme.example")
		p := member.get(webhooksPath)
		if p.Status != 200 || !strings.Contains(p.Body, "read-only") || strings.Contains(p.Body, `id="create-endpoint"`) {
			t.Fatalf("member list: %d", p.Status)
		}
		p = member.get(webhooksPath + "/" + ep.ID)
		if p.Status != 200 || strings.Contains(p.Body, `id="edit-endpoint"`) || strings.Contains(p.Body, `id="rotate"`) || !strings.Contains(p.Body, `id="attempts"`) {
			t.Fatalf("member detail: %d", p.Status)
		}
		before := e.onlyEndpoint(t)
		for _, path := range []string{"/create", "/" + ep.ID + "/update", "/" + ep.ID + "/rotate", "/" + ep.ID + "/enable",
			"/" + ep.ID + "/replay", "/" + ep.ID + "/test", "/" + ep.ID + "/delete"} {
			p := member.post(webhooksPath+path, url.Values{"url": {"https://93.184.215.14/evil"}, "confirm": {"yes"}})
			if p.Status != http.StatusForbidden || !strings.Contains(p.Body, "webhook endpoints is reserved") {
				t.Errorf("member POST %s: %d", path, p.Status)
			}
		}
		if p := member.get(webhooksPath + "/" + ep.ID + "/delete"); p.Status != http.StatusForbidden {
			t.Errorf("member delete page: %d", p.Status)
		}
		if after := e.onlyEndpoint(t); after.URL != before.URL || after.SecretHint != before.SecretHint {
			t.Fatal("a member's request changed the endpoint")
		}
	})

	t.Run("cross-origin forms are refused", func(t *testing.T) {
		p := admin.post(webhooksPath+"/"+ep.ID+"/delete", url.Values{"confirm": {"yes"}}, "Sec-Fetch-Site", "cross-site")
		if p.Status != http.StatusForbidden {
			t.Fatalf("cross-site delete: %d", p.Status)
		}
		e.onlyEndpoint(t)
	})

	t.Run("another company's endpoint is a 404", func(t *testing.T) {
		var other int64
		if err := e.Pool.QueryRow(context.Background(), `INSERT INTO companies (slug, name) VALUES ('globex', 'Globex') RETURNING id`).Scan(&other); err != nil {
			t.Fatal(err)
		}
		_, theirs, err := e.webhookStore().Create(context.Background(), other, webhooks.Input{URL: "https://93.184.215.14/globex"})
		if err != nil {
			t.Fatal(err)
		}
		for _, pg := range []page{admin.get(webhooksPath + "/" + theirs.ID), admin.post(webhooksPath+"/"+theirs.ID+"/rotate", nil),
			admin.post(webhooksPath+"/"+theirs.ID+"/delete", url.Values{"confirm": {"yes"}}), admin.get(webhooksPath + "/not-a-uuid")} {
			if pg.Status != http.StatusNotFound {
				t.Errorf("another company's endpoint: %d", pg.Status)
			}
		}
		if _, err := e.webhookStore().Get(context.Background(), other, theirs.ID); err != nil {
			t.Fatalf("their endpoint is gone: %v", err)
		}
	})

	t.Run("limit and delete", func(t *testing.T) {
		if p := admin.post(webhooksPath+"/create", url.Values{"url": {"https://93.184.215.14/two"}}); p.Status != 200 {
			t.Fatalf("second create: %d", p.Status)
		}
		if p := admin.get(webhooksPath); strings.Contains(p.Body, `id="create-endpoint"`) || !strings.Contains(p.Body, "maximum of 2") {
			t.Fatal("the page offers a create form at the limit")
		}
		if p := admin.post(webhooksPath+"/create", url.Values{"url": {"https://93.184.215.14/three"}}); p.Status != http.StatusConflict {
			t.Fatalf("third create: %d", p.Status)
		}
		// Delete needs the confirmation page.
		if p := admin.post(webhooksPath+"/"+ep.ID+"/delete", nil); p.Status != http.StatusSeeOther || p.Header.Get("Location") != webhooksPath+"/"+ep.ID+"/delete" {
			t.Fatalf("unconfirmed delete: %d %q", p.Status, p.Header.Get("Location"))
		}
		if p := admin.get(webhooksPath + "/" + ep.ID + "/delete"); p.Status != 200 || !strings.Contains(p.Body, `id="confirm-delete"`) {
			t.Fatalf("delete page: %d", p.Status)
		}
		if p := admin.post(webhooksPath+"/"+ep.ID+"/delete", url.Values{"confirm": {"yes"}}); p.Status != http.StatusSeeOther {
			t.Fatalf("delete: %d", p.Status)
		}
		if _, err := e.webhookStore().Get(context.Background(), e.CompanyID, ep.ID); err == nil {
			t.Fatal("the endpoint survived its deletion")
		}
	})
}
