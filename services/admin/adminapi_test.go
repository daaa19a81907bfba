package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/apikey"
	"github.com/parleyhq/parley/services/admin/internal/config"
)

const testAdminToken = "test-operator-token-0123456789abcdef"

type apiAnswer struct {
	Status int
	Header http.Header
	Body   map[string]any
}

func callAPI(t *testing.T, e *env, method, path, auth string) apiAnswer {
	t.Helper()
	req, err := http.NewRequest(method, e.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: Content-Type %q, body %s", method, path, ct, raw)
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("%s %s: body %s: %v", method, path, raw, err)
	}
	return apiAnswer{Status: res.StatusCode, Header: res.Header, Body: body}
}

func (a apiAnswer) detail() string { s, _ := a.Body["detail"].(string); return s }

func TestAdminAPIDisabledWithoutToken(t *testing.T) {
	e := newEnv(t, nil)
	path := "/admin/api/companies/" + strconv.FormatInt(e.CompanyID, 10) + "/keys"
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		a := callAPI(t, e, method, path, "Bearer "+testAdminToken)
		if a.Status != http.StatusServiceUnavailable || !strings.Contains(a.detail(), "PARLEY_ADMIN_TOKEN") {
			t.Fatalf("%s without a configured token: %d %q", method, a.Status, a.detail())
		}
	}
	a := callAPI(t, e, http.MethodPost, path, "Bearer ")
	if a.Status != http.StatusServiceUnavailable {
		t.Fatalf("empty bearer against an unset token: %d", a.Status)
	}
}

func TestAdminAPI(t *testing.T) {
	e := newEnv(t, func(c *config.Config) { c.AdminToken = testAdminToken })
	company := "/admin/api/companies/" + strconv.FormatInt(e.CompanyID, 10)
	auth := "Bearer " + testAdminToken

	t.Run("token", func(t *testing.T) {
		for _, bad := range []string{"", "Bearer", "Bearer wrong", "Bearer " + testAdminToken + "x", "Basic " + testAdminToken, testAdminToken} {
			a := callAPI(t, e, http.MethodGet, company+"/keys", bad)
			if a.Status != http.StatusUnauthorized || a.detail() != "Invalid admin token" || a.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("Authorization %q: %d %q", bad, a.Status, a.detail())
			}
		}
		if a := callAPI(t, e, http.MethodPost, company+"/keys", "bearer "+testAdminToken); a.Status != http.StatusCreated {
			t.Fatalf("lower-case scheme: %d", a.Status)
		}
		if keys, _ := e.Keys.List(t.Context(), e.CompanyID); len(keys) != 1 {
			t.Fatalf("%d keys", len(keys))
		}
		e.expectInvalidations(firstKeyID(t, e))
		if _, err := e.Pool.Exec(t.Context(), `DELETE FROM api_keys`); err != nil {
			t.Fatal(err)
		}
	})

	a := callAPI(t, e, http.MethodGet, company+"/keys", auth)
	if a.Status != http.StatusOK || len(a.Body["keys"].([]any)) != 0 {
		t.Fatalf("list with no key: %d %v", a.Status, a.Body)
	}

	a = callAPI(t, e, http.MethodPost, company+"/keys", auth)
	first, _ := a.Body["api_key"].(string)
	if a.Status != http.StatusCreated || first == "" || a.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("create: %d %v", a.Status, a.Header)
	}
	p1, err := apikey.Parse(first)
	if err != nil {
		t.Fatalf("created key %q: %v", first, err)
	}
	if k := a.Body["key"].(map[string]any); k["key_id"] != p1.KeyID || k["state"] != "active" || k["masked"] != apikey.Mask(p1.KeyID, apikey.Hint(p1.Secret)) {
		t.Fatalf("created key description %v", k)
	}
	e.mustAuthenticate(first, true)
	e.expectInvalidations(p1.KeyID)

	if a := callAPI(t, e, http.MethodPost, company+"/keys", auth); a.Status != http.StatusConflict {
		t.Fatalf("second create: %d", a.Status)
	}

	a = callAPI(t, e, http.MethodPost, company+"/keys/rotate", auth)
	second, _ := a.Body["api_key"].(string)
	p2, err := apikey.Parse(second)
	if a.Status != http.StatusCreated || err != nil {
		t.Fatalf("rotate: %d %q", a.Status, second)
	}
	prev := a.Body["previous"].(map[string]any)
	wantGrace := e.Clock.Now().Add(apikey.GracePeriod).UTC().Format(time.RFC3339)
	if prev["key_id"] != p1.KeyID || prev["state"] != "rotated" || prev["grace_ends_at"] != wantGrace {
		t.Fatalf("rotate: previous %v, want grace until %s", prev, wantGrace)
	}
	e.expectInvalidations(p1.KeyID, p2.KeyID)
	e.mustAuthenticate(first, true)
	e.mustAuthenticate(second, true)

	a = callAPI(t, e, http.MethodGet, company+"/keys", auth)
	keys := a.Body["keys"].([]any)
	if len(keys) != 2 || strings.Contains(toJSON(t, a.Body), p2.Secret) {
		t.Fatalf("list: %v", a.Body)
	}

	a = callAPI(t, e, http.MethodPost, company+"/keys/"+p1.KeyID+"/revoke", auth)
	if a.Status != http.StatusOK || a.Body["key"].(map[string]any)["state"] != "revoked" {
		t.Fatalf("revoke: %d %v", a.Status, a.Body)
	}
	e.expectInvalidations(p1.KeyID)
	e.mustAuthenticate(first, false)
	e.mustAuthenticate(second, true)
	if a := callAPI(t, e, http.MethodPost, company+"/keys/"+p1.KeyID+"/revoke", auth); a.Status != http.StatusConflict {
		t.Fatalf("revoke twice: %d", a.Status)
	}

	a = callAPI(t, e, http.MethodGet, company+"/keys/events?limit=10", auth)
	var trail []string
	for _, ev := range a.Body["events"].([]any) {
		m := ev.(map[string]any)
		trail = append(trail, m["action"].(string)+" "+m["key_id"].(string)+" "+m["actor"].(string))
	}
	want := "revoke " + p1.KeyID + " admin-api|rotate " + p2.KeyID + " admin-api|create " + p1.KeyID + " admin-api"
	if strings.Join(trail, "|") != want {
		t.Fatalf("events %v, want %s", trail, want)
	}

	errorsCases := []struct {
		method, path string
		status       int
		detail       string
	}{
		{http.MethodGet, "/admin/api/companies/999999/keys", http.StatusNotFound, "Company not found"},
		{http.MethodPost, "/admin/api/companies/999999/keys", http.StatusNotFound, "Company not found"},
		{http.MethodPost, "/admin/api/companies/999999/keys/rotate", http.StatusNotFound, "Company not found"},
		{http.MethodPost, "/admin/api/companies/acme/keys", http.StatusNotFound, "Company not found"},
		{http.MethodPost, company + "/keys/nosuchkey0000000/revoke", http.StatusNotFound, "API key not found"},
		{http.MethodGet, company + "/keys/events?limit=0", http.StatusBadRequest, "limit must be an integer from 1 to 1000"},
		{http.MethodDelete, company + "/keys", http.StatusMethodNotAllowed, "Method not allowed"},
		{http.MethodGet, "/admin/api/nothing", http.StatusNotFound, "Not found"},
	}
	for _, c := range errorsCases {
		if a := callAPI(t, e, c.method, c.path, auth); a.Status != c.status || a.detail() != c.detail {
			t.Errorf("%s %s: %d %q, want %d %q", c.method, c.path, a.Status, a.detail(), c.status, c.detail)
		}
	}

	// A key of one company cannot be revoked through another.
	var other int64
	if err := e.Pool.QueryRow(t.Context(), `INSERT INTO companies (slug, name) VALUES ('globex', 'Globex') RETURNING id`).Scan(&other); err != nil {
		t.Fatal(err)
	}
	a = callAPI(t, e, http.MethodPost, "/admin/api/companies/"+strconv.FormatInt(other, 10)+"/keys/"+p2.KeyID+"/revoke", auth)
	if a.Status != http.StatusNotFound {
		t.Fatalf("revoke through another company: %d", a.Status)
	}
	e.mustAuthenticate(second, true)

	if a := callAPI(t, e, http.MethodPost, company+"/keys/rotate", auth); a.Status != http.StatusCreated {
		t.Fatalf("rotate again: %d", a.Status)
	}
	if _, err := e.Pool.Exec(t.Context(), `UPDATE api_keys SET state = 'revoked', revoked_at = now(), grace_ends_at = NULL WHERE company_id = $1`, e.CompanyID); err != nil {
		t.Fatal(err)
	}
	if a := callAPI(t, e, http.MethodPost, company+"/keys/rotate", auth); a.Status != http.StatusConflict {
		t.Fatalf("rotate with no active key: %d", a.Status)
	}
	if strings.Contains(e.Logs.String(), p2.Secret) || strings.Contains(e.Logs.String(), testAdminToken) {
		t.Fatal("a key or the admin token was logged")
	}
}

func firstKeyID(t *testing.T, e *env) string {
	t.Helper()
	keys, err := e.Keys.List(t.Context(), e.CompanyID)
	if err != nil || len(keys) == 0 {
		t.Fatalf("no key: %v", err)
	}
	return keys[0].KeyID
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A key change stands when the broadcast cannot get out: it is committed,
// answered, logged and counted; the gateways' cache TTL bounds the rest.
func TestKeyChangeDuringNATSOutage(t *testing.T) {
	e := newEnv(t, func(c *config.Config) { c.AdminToken = testAdminToken })
	company := "/admin/api/companies/" + strconv.FormatInt(e.CompanyID, 10)
	auth := "Bearer " + testAdminToken
	a := callAPI(t, e, http.MethodPost, company+"/keys", auth)
	if a.Status != http.StatusCreated {
		t.Fatalf("create: %d", a.Status)
	}
	first := a.Body["api_key"].(string)
	e.expectInvalidations(keyIDOf(t, first))

	e.NATS.Stop()
	start := time.Now()
	a = callAPI(t, e, http.MethodPost, company+"/keys/"+keyIDOf(t, first)+"/revoke", auth)
	if a.Status != http.StatusOK {
		t.Fatalf("revoke during the outage: %d %q", a.Status, a.detail())
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("revoke during the outage took %v", took)
	}
	e.mustAuthenticate(first, false)
	if !strings.Contains(e.Logs.String(), "invalidation broadcast failed") {
		t.Fatal("the failed broadcast was not logged")
	}
	res, err := http.Get(e.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	metrics, _ := io.ReadAll(res.Body)
	if !strings.Contains(string(metrics), "parley_admin_invalidation_publish_failures_total 1") {
		t.Fatal("the failed broadcast was not counted")
	}
}
