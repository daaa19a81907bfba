package cli

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/pkg/webhooks"
)

func TestWebhooksCommands(t *testing.T) {
	s := newStack(t)
	s.company("acme")

	var created map[string]any
	s.jsonOK(&created, "webhooks", "create", "--company", "acme", "--url", "https://93.184.215.14/hooks",
		"--description", "CRM", "--event-types", "message.failed,batch.completed")
	secret, _ := created["secret"].(string)
	id, _ := created["id"].(string)
	if !strings.HasPrefix(secret, "whsec_") || id == "" || created["secret_hint"] != secret[len(secret)-4:] {
		t.Fatalf("create = %v", created)
	}
	if got := created["event_types"].([]any); len(got) != 2 || got[0] != "message.failed" {
		t.Fatalf("event types = %v", got)
	}

	// The table shows the endpoint; the list never shows the secret.
	r := s.ok("webhooks", "list", "--company", "acme")
	if !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, "message.failed,batch.completed") || strings.Contains(r.stdout, secret) {
		t.Fatalf("list:\n%s", r.stdout)
	}

	// Refusals: usage mistakes (exit 2) and failures (exit 1), nothing changed.
	for _, tc := range []struct {
		code int
		want string
		args []string
	}{
		{ExitUsage, `required flag(s) "url" not set`, []string{"webhooks", "create", "--company", "acme"}},
		{ExitUsage, "--url: url must use https", []string{"webhooks", "create", "--company", "acme", "--url", "http://93.184.215.14/"}},
		{ExitUsage, "--url: url points to a loopback", []string{"webhooks", "create", "--company", "acme", "--url", "https://127.0.0.1/"}},
		{ExitUsage, "--url: url points to a loopback, private, link-local", []string{"webhooks", "create", "--company", "acme", "--url", "https://169.254.169.254/"}},
		{ExitUsage, "--event-types: unknown event type", []string{"webhooks", "create", "--company", "acme", "--url", "https://93.184.215.14/", "--event-types", "message.exploded"}},
		{ExitUsage, "nothing to update", []string{"webhooks", "update", id, "--company", "acme"}},
		{ExitUsage, "not both", []string{"webhooks", "update", id, "--company", "acme", "--all-events", "--event-types", "message.sent"}},
		{ExitUsage, "takes one webhook endpoint id", []string{"webhooks", "delete", "--company", "acme"}},
		{ExitUsage, "--from is required", []string{"webhooks", "replay", id, "--company", "acme"}},
		{ExitUsage, `--from "yesterday"`, []string{"webhooks", "replay", id, "--company", "acme", "--from", "yesterday"}},
		{ExitUsage, "--to: to must be after from", []string{"webhooks", "replay", id, "--company", "acme", "--from", "1h", "--to", "2h"}},
		{ExitUsage, "--event-type: unknown event type", []string{"webhooks", "test", id, "--company", "acme", "--event-type", "nope.nope"}},
		{ExitUsage, "--limit must be", []string{"webhooks", "attempts", id, "--company", "acme", "--limit", "0"}},
		{ExitFailure, `has no webhook endpoint "00000000-0000-4000-8000-000000000000"`, []string{"webhooks", "delete", "00000000-0000-4000-8000-000000000000", "--company", "acme"}},
		{ExitFailure, `has no webhook endpoint "nope"`, []string{"webhooks", "rotate-secret", "nope", "--company", "acme"}},
	} {
		s.fails(tc.code, tc.want, append(tc.args, "--json")...)
	}
	if n := s.count("webhook_endpoints"); n != 1 {
		t.Fatalf("%d endpoints after refusals, want 1", n)
	}

	var up map[string]any
	s.jsonOK(&up, "webhooks", "update", id, "--company", "acme", "--all-events", "--description", "Shop", "--enabled=false")
	if up["enabled"] != false || up["description"] != "Shop" || len(up["event_types"].([]any)) != 0 || up["url"] != "https://93.184.215.14/hooks" {
		t.Fatalf("update = %v", up)
	}
	s.fails(ExitFailure, "is disabled; enable it first", "webhooks", "test", id, "--company", "acme")
	var en map[string]any
	s.jsonOK(&en, "webhooks", "enable", id, "--company", "acme")
	if en["enabled"] != true {
		t.Fatalf("enable = %v", en)
	}

	var rot map[string]any
	s.jsonOK(&rot, "webhooks", "rotate-secret", id, "--company", "acme")
	if ns, _ := rot["secret"].(string); !strings.HasPrefix(ns, "whsec_") || ns == secret || rot["previous_expires_at"] == nil {
		t.Fatalf("rotate = %v", rot)
	}
	box, _ := secretbox.New(secretbox.DevKey)
	store := webhooks.NewStore(s.pool, box, webhooks.DefaultConfig())
	if keys, err := store.ActiveSecrets(context.Background(), id, time.Now()); err != nil || len(keys) != 2 {
		t.Fatalf("active secrets after rotate: %d, %v", len(keys), err)
	}

	var test map[string]any
	s.jsonOK(&test, "webhooks", "test", id, "--company", "acme", "--event-type", "contact.opted_out")
	if test["event_type"] != "contact.opted_out" || test["status"] != "pending" {
		t.Fatalf("test = %v", test)
	}
	did := int64(test["delivery_id"].(float64))
	code := 500
	if err := store.RecordAttempt(context.Background(), webhooks.AttemptResult{DeliveryID: did, ResponseCode: &code,
		Latency: 25 * time.Millisecond, Excerpt: "internal error", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	r = s.ok("webhooks", "attempts", id, "--company", "acme")
	if !strings.Contains(r.stdout, "contact.opted_out") || !strings.Contains(r.stdout, "500") || !strings.Contains(r.stdout, "25 ms") || !strings.Contains(r.stdout, "internal error") {
		t.Fatalf("attempts:\n%s", r.stdout)
	}
	var rep map[string]any
	s.jsonOK(&rep, "webhooks", "replay", id, "--company", "acme", "--from", "1h")
	if rep["queued"] != float64(1) {
		t.Fatalf("replay = %v", rep)
	}

	var del map[string]any
	s.jsonOK(&del, "webhooks", "delete", id, "--company", "acme")
	if del["deleted"] != id || s.count("webhook_endpoints") != 0 {
		t.Fatalf("delete = %v", del)
	}
}

func TestWebhooksAllowPrivateSettingAndLimit(t *testing.T) {
	s := newStack(t)
	co := s.company("acme")
	s.fails(ExitUsage, "must use https", "webhooks", "create", "--company", "acme", "--url", "http://127.0.0.1:7999/hook")
	s.environ = append(s.environ, "PARLEY_WEBHOOKS_ALLOW_PRIVATE=true", "PARLEY_WEBHOOKS_MAX_ENDPOINTS=1")
	s.ok("webhooks", "create", "--company", strconv.FormatInt(co, 10), "--url", "http://127.0.0.1:7999/hook")
	s.fails(ExitFailure, "the most webhook endpoints allowed", "webhooks", "create", "--company", "acme", "--url", "http://127.0.0.1:7999/two")
	if n := s.count("webhook_endpoints"); n != 1 {
		t.Fatalf("%d endpoints, want 1", n)
	}
}
