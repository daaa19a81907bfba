package drillenv

// What the drills that go through the gateway need: its public API as a
// company's integrator calls it, and provider-sim's webhooks delivered to it.

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/apikey"
	"github.com/parleyhq/parley/testkit/serviceproc"
)

// AppSecret signs provider-sim's webhooks to a gateway started by
// StartGatewayForSim.
const AppSecret = "drill-app-secret"

// maxContacts is the most contacts one campaign send or automation
// trigger carries (the gateway's MaxContacts); maxProcessed the most of a
// trigger's contacts the gateway processes (the spec's first 50).
const (
	maxContacts  = 1000
	maxProcessed = 50
)

// StartGatewayForSim runs the gateway (StartGateway, extra added) with the
// drills' app secret and points provider-sim's webhooks (statuses,
// templates, numbers) at its POST /webhooks/whatsapp; it returns the
// process and the gateway's base URL.
func (e *Env) StartGatewayForSim(extra ...string) (*serviceproc.Process, string) {
	e.T.Helper()
	p, base := e.StartGateway(append([]string{"PARLEY_WEBHOOK_APP_SECRET=" + AppSecret}, extra...)...)
	e.Sim.Do(http.MethodPatch, "/_sim/callbacks", map[string]any{"url": base + "/webhooks/whatsapp", "app_secret": AppSecret}, nil)
	return p, base
}

// API is a company's client of the gateway's public API, as its integrator
// calls it: the company's key in service-api-key, and a 429 sent again
// after its Retry-After.
type API struct {
	T    testing.TB
	Base string
	Key  string
}

var apiClient = &http.Client{Timeout: 30 * time.Second}

// NewAPI creates a key for the company and returns its client of the
// gateway at base.
func (e *Env) NewAPI(base string, companyID int64) API {
	e.T.Helper()
	key, _, err := apikey.NewStore(e.Pool, nil).Create(e.Ctx, companyID, apikey.Actor{Label: "drill"})
	if err != nil {
		e.T.Fatal(err)
	}
	return API{T: e.T, Base: base, Key: key}
}

// Do sends body as JSON (none when nil) and decodes a 2xx answer into out
// (when not nil). A 429 is sent again after its Retry-After, for at most a
// minute; any other answer of 300 or more, or no answer, fails the test.
func (a API) Do(method, path string, body, out any) {
	a.T.Helper()
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			a.T.Fatal(err)
		}
	}
	for deadline := time.Now().Add(time.Minute); ; {
		req, err := http.NewRequest(method, a.Base+path, bytes.NewReader(raw))
		if err != nil {
			a.T.Fatal(err)
		}
		req.Header.Set("service-api-key", a.Key)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := apiClient.Do(req)
		if err != nil {
			a.T.Fatalf("%s %s: %v", method, path, err)
		}
		answer, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			a.T.Fatalf("%s %s: %v", method, path, err)
		}
		if resp.StatusCode == http.StatusTooManyRequests && time.Now().Before(deadline) {
			wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			time.Sleep(time.Duration(max(wait, 1)) * time.Second)
			continue
		}
		if resp.StatusCode >= 300 {
			a.T.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, answer)
		}
		if out != nil {
			if err := json.Unmarshal(answer, out); err != nil {
				a.T.Fatalf("%s %s: %v: %s", method, path, err, answer)
			}
		}
		return
	}
}

// accepted is a send's 202.
type accepted struct {
	BatchID  string `json:"batch_id"`
	Contacts int    `json:"contacts"`
}

// SendCampaign sends the campaign to phones through the gateway (POST
// /api/campaigns/send, up to 1,000 contacts a request), adds each
// request's phones to Accepted once it is answered 202, and returns the
// batch ids.
func (e *Env) SendCampaign(a API, campaignID int64, phones []string) []string {
	e.T.Helper()
	var ids []string
	for start := 0; start < len(phones); start += maxContacts {
		chunk := phones[start:min(start+maxContacts, len(phones))]
		var got accepted
		a.Do(http.MethodPost, "/api/campaigns/send", map[string]any{"campaign_id": campaignID, "contacts": chunk}, &got)
		if got.Contacts != len(chunk) {
			e.T.Fatalf("campaign send: %d contacts accepted of %d", got.Contacts, len(chunk))
		}
		e.Accepted = append(e.Accepted, chunk...)
		ids = append(ids, got.BatchID)
	}
	return ids
}

// TriggerAutomation triggers the automation for phones (at most the 50 the
// gateway processes) through the gateway (POST /api/automations/send), adds
// them to Accepted once it is answered 202, and returns the batch id.
func (e *Env) TriggerAutomation(a API, automationID int64, phones []string) string {
	e.T.Helper()
	if len(phones) > maxProcessed {
		e.T.Fatalf("trigger of %d contacts: the gateway processes the first %d", len(phones), maxProcessed)
	}
	contacts := make([]map[string]string, len(phones))
	for i, p := range phones {
		contacts[i] = map[string]string{"phone": p}
	}
	var got accepted
	a.Do(http.MethodPost, "/api/automations/send", map[string]any{"automation_id": automationID, "contacts": contacts}, &got)
	if got.Contacts != len(phones) {
		e.T.Fatalf("automation trigger: %d contacts accepted of %d", got.Contacts, len(phones))
	}
	e.Accepted = append(e.Accepted, phones...)
	return got.BatchID
}
