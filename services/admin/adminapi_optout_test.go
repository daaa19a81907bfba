package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/contacts"
	"github.com/parleyhq/parley/services/admin/internal/config"
)

func callAPIBody(t *testing.T, e *env, method, path, body string) apiAnswer {
	t.Helper()
	req, err := http.NewRequest(method, e.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var b map[string]any
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatalf("%s %s: body %s: %v", method, path, raw, err)
	}
	return apiAnswer{Status: res.StatusCode, Header: res.Header, Body: b}
}

func TestAdminAPIOptOutSettings(t *testing.T) {
	e := newEnv(t, func(c *config.Config) { c.AdminToken = testAdminToken })
	path := "/admin/api/companies/" + strconv.FormatInt(e.CompanyID, 10) + "/opt-out-settings"
	stored := func() int {
		var n int
		if err := e.Pool.QueryRow(t.Context(), `SELECT count(*) FROM company_opt_out_settings`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	a := callAPIBody(t, e, http.MethodGet, path, "")
	if a.Status != 200 || a.Body["default"] != true || !strings.Contains(strings.Join(anyStrings(a.Body["opt_out_keywords"]), ","), "STOP,STOPALL") {
		t.Fatalf("defaults: %d %v", a.Status, a.Body)
	}
	// Bad input: a clear 4xx, nothing stored.
	for _, tc := range []struct {
		body string
		want int
	}{
		{`not json`, 400},
		{`{"opt_out_keywords":["STOP"],"opt_in_keywords":[],"opt_out_payloads":[],"extra":1}`, 400},
		{`{"opt_out_keywords":"STOP","opt_in_keywords":[],"opt_out_payloads":[]}`, 400},
		{`{"opt_out_keywords":["STOP"]}`, 422},
		{`{"opt_out_keywords":["STOP"],"opt_in_keywords":["stop"],"opt_out_payloads":[]}`, 422},
		{`{"opt_out_keywords":[" "],"opt_in_keywords":[],"opt_out_payloads":[]}`, 422},
	} {
		a := callAPIBody(t, e, http.MethodPut, path, tc.body)
		if a.Status != tc.want || a.detail() == "" {
			t.Fatalf("PUT %s: %d %v, want %d with a detail", tc.body, a.Status, a.Body, tc.want)
		}
	}
	if n := stored(); n != 0 {
		t.Fatalf("refused bodies stored %d rows", n)
	}
	if a := callAPIBody(t, e, http.MethodGet, "/admin/api/companies/999999/opt-out-settings", ""); a.Status != 404 {
		t.Fatalf("unknown company: %d", a.Status)
	}
	if a := callAPIBody(t, e, http.MethodPut, "/admin/api/companies/999999/opt-out-settings",
		`{"opt_out_keywords":["STOP"],"opt_in_keywords":[],"opt_out_payloads":[]}`); a.Status != 404 {
		t.Fatalf("unknown company: %d", a.Status)
	}

	a = callAPIBody(t, e, http.MethodPut, path, `{"opt_out_keywords":["basta"," Stop "],"opt_in_keywords":["ancora"],"opt_out_payloads":["STOP_PROMOTIONS"]}`)
	if a.Status != 200 || strings.Join(anyStrings(a.Body["opt_out_keywords"]), ",") != "BASTA,STOP" || a.Body["default"] != false {
		t.Fatalf("put: %d %v", a.Status, a.Body)
	}
	got, err := contacts.NewStore(e.Pool, nil).OptOutSettings(t.Context(), e.CompanyID)
	if err != nil || strings.Join(got.OptInKeywords, ",") != "ANCORA" || strings.Join(got.OptOutPayloads, ",") != "STOP_PROMOTIONS" {
		t.Fatalf("stored %+v %v", got, err)
	}
	if a := callAPIBody(t, e, http.MethodDelete, path, ""); a.Status != 200 || a.Body["default"] != true || stored() != 0 {
		t.Fatalf("reset: %d %v", a.Status, a.Body)
	}
	if a := callAPIBody(t, e, http.MethodPost, path, ""); a.Status != 405 {
		t.Fatalf("POST: %d", a.Status)
	}

	// A contact with its opt-out history.
	if _, err := contacts.RecordConsent(t.Context(), e.Pool, contacts.ConsentChange{CompanyID: e.CompanyID, Phone: "+393331234567",
		OptedOut: true, Reason: contacts.ReasonKeyword, Keyword: "STOP", ProviderMessageID: "wamid.IN1"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	cp := "/admin/api/companies/" + strconv.FormatInt(e.CompanyID, 10) + "/contacts/"
	a = callAPIBody(t, e, http.MethodGet, cp+"+393331234567", "")
	h, _ := a.Body["opt_out_history"].([]any)
	if a.Status != 200 || a.Body["opted_out"] != true || len(h) != 1 || h[0].(map[string]any)["provider_message_id"] != "wamid.IN1" {
		t.Fatalf("contact: %d %v", a.Status, a.Body)
	}
	for _, bad := range []string{"+393339999999", "nope"} {
		if a := callAPIBody(t, e, http.MethodGet, cp+bad, ""); a.Status != 404 {
			t.Fatalf("contact %s: %d", bad, a.Status)
		}
	}
}

func anyStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
