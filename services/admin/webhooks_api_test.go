package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/pkg/webhooks"
	"github.com/parleyhq/parley/services/admin/internal/config"
)

// callJSON is callAPI with a JSON body.
func callJSON(t *testing.T, e *env, method, path, body string) apiAnswer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: body %s: %v", method, path, raw, err)
	}
	return apiAnswer{Status: res.StatusCode, Header: res.Header, Body: out}
}

// locs are the fields a 422 body names, "field:type" each.
func (a apiAnswer) locs() []string {
	items, _ := a.Body["detail"].([]any)
	var out []string
	for _, it := range items {
		m := it.(map[string]any)
		loc := m["loc"].([]any)
		if loc[0] != "body" || m["msg"] == "" {
			return []string{"malformed"}
		}
		out = append(out, loc[len(loc)-1].(string)+":"+m["type"].(string))
	}
	return out
}

func (e *env) endpointCount(t *testing.T) int {
	var n int
	if err := e.Pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_endpoints`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestAdminAPIWebhooks(t *testing.T) {
	e := newEnv(t, func(c *config.Config) { c.AdminToken = testAdminToken; c.Webhooks.MaxEndpoints = 2 })
	base := "/admin/api/companies/" + strconv.FormatInt(e.CompanyID, 10) + "/webhooks"

	// Without the token nothing is reachable.
	if a := callAPI(t, e, http.MethodGet, base, ""); a.Status != http.StatusUnauthorized {
		t.Fatalf("no token: %d", a.Status)
	}

	created := callJSON(t, e, http.MethodPost, base, `{"url": "https://93.184.215.14/hooks", "description": "CRM", "event_types": ["message.failed"]}`)
	if created.Status != http.StatusCreated {
		t.Fatalf("create: %d %v", created.Status, created.Body)
	}
	secret, _ := created.Body["secret"].(string)
	ep := created.Body["endpoint"].(map[string]any)
	id := ep["id"].(string)
	if !strings.HasPrefix(secret, "whsec_") || ep["secret_hint"] != secret[len(secret)-4:] || ep["enabled"] != true {
		t.Fatalf("created = %v", created.Body)
	}
	if strings.Contains(e.Logs.String(), strings.TrimPrefix(secret, "whsec_")) {
		t.Fatal("the secret was logged")
	}
	if c := created.Header.Get("Cache-Control"); c != "no-store" {
		t.Fatalf("Cache-Control %q on a response with a secret", c)
	}

	list := callJSON(t, e, http.MethodGet, base, "")
	eps := list.Body["endpoints"].([]any)
	if list.Status != 200 || len(eps) != 1 || strings.Contains(mustJSON(t, list.Body), secret) || list.Body["limit"] != float64(2) {
		t.Fatalf("list = %d %v", list.Status, list.Body)
	}

	t.Run("bad input changes nothing", func(t *testing.T) {
		cases := []struct {
			method, path, body string
			status             int
			locs               string
		}{
			{"POST", base, `{"description": "no url"}`, 422, "url:missing"},
			{"POST", base, `{"url": "http://93.184.215.14/"}`, 422, "url:value_error"},
			{"POST", base, `{"url": "https://127.0.0.1/"}`, 422, "url:value_error"},
			{"POST", base, `{"url": "https://169.254.169.254/latest/meta-data"}`, 422, "url:value_error"},
			{"POST", base, `{"url": "https://localhost/"}`, 422, "url:value_error"},
			{"POST", base, `{"url": "https://93.184.215.14/` + strings.Repeat("a", 2048) + `"}`, 422, "url:value_error"},
			{"POST", base, `{"url": "https://93.184.215.14/", "event_types": ["message.exploded"], "description": "` + strings.Repeat("d", 501) + `"}`, 422, "description:value_error,event_types:value_error"},
			{"POST", base, `{"url": 7}`, 422, "url:value_error"},
			{"POST", base, `{"url": "https://93.184.215.14/", "secret": "mine"}`, 422, "secret:extra_forbidden"},
			{"POST", base, `{"url": `, 400, ""},
			{"POST", base, `[1]`, 422, ":value_error"},
			{"PATCH", base + "/" + id, `{"url": "ftp://x/"}`, 422, "url:value_error"},
			{"PATCH", base + "/" + id, `{"event_types": "message.sent"}`, 422, "event_types:value_error"},
			{"PATCH", base + "/not-a-uuid", `{"description": "x"}`, 404, ""},
			{"PATCH", base + "/00000000-0000-4000-8000-000000000000", `{"description": "x"}`, 404, ""},
			{"DELETE", base + "/00000000-0000-4000-8000-000000000000", ``, 404, ""},
			{"POST", base + "/" + id + "/replay", `{"from": "2025-06-02T00:00:00Z"}`, 422, "to:missing"},
			{"POST", base + "/" + id + "/replay", `{"from": "yesterday", "to": "2025-06-02T00:00:00Z"}`, 422, "from:value_error"},
			{"POST", base + "/" + id + "/replay", `{"from": "2025-06-03T00:00:00Z", "to": "2025-06-02T00:00:00Z"}`, 422, "to:value_error"},
			{"POST", base + "/" + id + "/test", `{"event_type": "message.exploded"}`, 422, "event_type:value_error"},
			{"GET", base + "/" + id + "/attempts?limit=0", ``, 400, ""},
			{"GET", base + "/" + id + "/attempts?cursor=abc", ``, 400, ""},
			{"PUT", base + "/" + id, `{}`, 405, ""},
			{"GET", "/admin/api/companies/999999/webhooks", ``, 404, ""},
			{"POST", "/admin/api/companies/999999/webhooks", `{"url": "https://93.184.215.14/"}`, 404, ""},
		}
		for _, c := range cases {
			a := callJSON(t, e, c.method, c.path, c.body)
			if a.Status != c.status {
				t.Errorf("%s %s %.60s: %d %v, want %d", c.method, c.path, c.body, a.Status, a.Body, c.status)
				continue
			}
			if c.status == 422 {
				if got := strings.Join(a.locs(), ","); got != c.locs {
					t.Errorf("%s %.60s: 422 items %s, want %s", c.method, c.body, got, c.locs)
				}
			} else if a.detail() == "" {
				t.Errorf("%s %s: %d without a detail: %v", c.method, c.path, a.Status, a.Body)
			}
		}
		if n := e.endpointCount(t); n != 1 {
			t.Fatalf("%d endpoints after refused requests, want 1", n)
		}
		got := callJSON(t, e, http.MethodGet, base+"/"+id, "").Body["endpoint"].(map[string]any)
		if got["url"] != "https://93.184.215.14/hooks" || got["description"] != "CRM" {
			t.Fatalf("a refused update changed the endpoint: %v", got)
		}
	})

	// Update, rotate, limit, test event, replay, attempts, enable, delete.
	up := callJSON(t, e, http.MethodPatch, base+"/"+id, `{"description": "Shop", "event_types": [], "enabled": false}`)
	upd := up.Body["endpoint"].(map[string]any)
	if up.Status != 200 || upd["description"] != "Shop" || len(upd["event_types"].([]any)) != 0 || upd["enabled"] != false || upd["url"] != "https://93.184.215.14/hooks" {
		t.Fatalf("update = %d %v", up.Status, up.Body)
	}
	if a := callJSON(t, e, http.MethodPost, base+"/"+id+"/test", ``); a.Status != http.StatusConflict {
		t.Fatalf("test event to a disabled endpoint: %d %v", a.Status, a.Body)
	}
	if a := callJSON(t, e, http.MethodPost, base+"/"+id+"/enable", ``); a.Status != 200 || a.Body["endpoint"].(map[string]any)["enabled"] != true {
		t.Fatalf("enable = %d %v", a.Status, a.Body)
	}

	rot := callJSON(t, e, http.MethodPost, base+"/"+id+"/rotate-secret", "")
	newSecret, _ := rot.Body["secret"].(string)
	if rot.Status != http.StatusCreated || newSecret == secret || !strings.HasPrefix(newSecret, "whsec_") {
		t.Fatalf("rotate = %d %v", rot.Status, rot.Body)
	}
	box, _ := secretbox.New(secretbox.DevKey)
	store := webhooks.NewStore(e.Pool, box, webhooks.DefaultConfig())
	keys, err := store.ActiveSecrets(context.Background(), id, e.Clock.Now())
	if err != nil || len(keys) != 2 {
		t.Fatalf("after rotation %d active secrets, %v", len(keys), err)
	}
	k1, _ := webhooks.ParseSecret(newSecret)
	k0, _ := webhooks.ParseSecret(secret)
	if !bytes.Equal(keys[0], k1) || !bytes.Equal(keys[1], k0) {
		t.Fatal("ActiveSecrets is not the new then the previous secret")
	}

	if a := callJSON(t, e, http.MethodPost, base, `{"url": "https://93.184.215.14/two"}`); a.Status != http.StatusCreated {
		t.Fatalf("second create: %d %v", a.Status, a.Body)
	}
	if a := callJSON(t, e, http.MethodPost, base, `{"url": "https://93.184.215.14/three"}`); a.Status != http.StatusConflict || !strings.Contains(a.detail(), "maximum of 2") {
		t.Fatalf("third create: %d %v", a.Status, a.Body)
	}

	test := callJSON(t, e, http.MethodPost, base+"/"+id+"/test", `{"event_type": "message.delivered"}`)
	d := test.Body["delivery"].(map[string]any)
	if test.Status != http.StatusAccepted || d["event_type"] != "message.delivered" || d["status"] != "pending" {
		t.Fatalf("test = %d %v", test.Status, test.Body)
	}
	var payload string
	if err := e.Pool.QueryRow(context.Background(), `SELECT payload::text FROM webhook_deliveries WHERE event_id = $1 AND endpoint_id = $2`, d["event_id"], id).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(payload, `"type": "message.delivered"`) || !strings.Contains(payload, `"state": "delivered"`) {
		t.Fatalf("test payload = %s", payload)
	}

	// The sender records attempts; the API pages through them.
	did := int64(d["id"].(float64))
	code := 503
	for i := 0; i < 3; i++ {
		next := e.Clock.Now().Add(time.Minute)
		if err := store.RecordAttempt(context.Background(), webhooks.AttemptResult{DeliveryID: did, ResponseCode: &code, Latency: 40 * time.Millisecond,
			Excerpt: "busy " + strconv.Itoa(i), At: e.Clock.Now(), NextAttemptAt: &next}); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.RecordAttempt(context.Background(), webhooks.AttemptResult{DeliveryID: did, Error: "timeout", At: e.Clock.Now()}); err != nil {
		t.Fatal(err)
	}
	page := callJSON(t, e, http.MethodGet, base+"/"+id+"/attempts?limit=3", "")
	atts := page.Body["attempts"].([]any)
	cursor, _ := page.Body["next_cursor"].(string)
	if page.Status != 200 || len(atts) != 3 || cursor == "" || atts[0].(map[string]any)["error"] != "timeout" ||
		atts[1].(map[string]any)["response_code"] != float64(503) || atts[1].(map[string]any)["excerpt"] != "busy 2" {
		t.Fatalf("attempts = %d %v", page.Status, page.Body)
	}
	rest := callJSON(t, e, http.MethodGet, base+"/"+id+"/attempts?limit=3&cursor="+cursor, "")
	if n := len(rest.Body["attempts"].([]any)); n != 1 || rest.Body["next_cursor"] != nil {
		t.Fatalf("second page = %v", rest.Body)
	}

	from := e.Clock.Now().Add(-time.Hour).Format(time.RFC3339)
	to := e.Clock.Now().Add(time.Hour).Format(time.RFC3339)
	rep := callJSON(t, e, http.MethodPost, base+"/"+id+"/replay", `{"from": "`+from+`", "to": "`+to+`"}`)
	if rep.Status != http.StatusAccepted || rep.Body["queued"] != float64(1) {
		t.Fatalf("replay = %d %v", rep.Status, rep.Body)
	}

	if a := callJSON(t, e, http.MethodDelete, base+"/"+id, ""); a.Status != 200 || a.Body["deleted"] != id {
		t.Fatalf("delete = %d %v", a.Status, a.Body)
	}
	if a := callJSON(t, e, http.MethodGet, base+"/"+id, ""); a.Status != 404 {
		t.Fatalf("get after delete = %d", a.Status)
	}
	if strings.Contains(e.Logs.String(), strings.TrimPrefix(newSecret, "whsec_")) {
		t.Fatal("the rotated secret was logged")
	}
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
