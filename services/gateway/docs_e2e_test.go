package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/delivery"
	"github.com/parleyhq/parley/pkg/secretbox"
)

// conforms sends a request to the real gateway and checks the answer (and,
// when validRequest, the request) against the served OpenAPI document.
func (g *gw) conforms(v validator.Validator, validRequest bool, method, path, key, body string, wantStatus int) response {
	g.t.Helper()
	r := g.do(method, path, key, []byte(body))
	if r.status != wantStatus {
		g.t.Fatalf("%s %s: %d %s, want %d", method, path, r.status, r.body, wantStatus)
	}
	req, err := http.NewRequest(method, g.url+path, strings.NewReader(body))
	if err != nil {
		g.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("service-api-key", key)
	resp := &http.Response{StatusCode: r.status, Header: r.header, Body: io.NopCloser(bytes.NewReader(r.body)), Request: req}
	var ok bool
	var errs []error
	if validRequest {
		okReq, reqErrs := v.ValidateHttpRequest(req)
		ok = okReq
		for _, e := range reqErrs {
			errs = append(errs, fmt.Errorf("request: %s: %s", e.Message, e.Reason))
		}
		req.Body = io.NopCloser(strings.NewReader(body))
	}
	okResp, respErrs := v.ValidateHttpResponse(req, resp)
	for _, e := range respErrs {
		errs = append(errs, fmt.Errorf("response: %s: %s", e.Message, e.Reason))
	}
	if (validRequest && !ok) || !okResp {
		g.t.Fatalf("%s %s (%d %s) does not conform to the document: %v", method, path, r.status, r.body, errs)
	}
	return r
}

// TestTheGatewayAnswersAsDocumented fetches the document from the gateway,
// without a key, and holds real answers of every endpoint to it.
func TestTheGatewayAnswersAsDocumented(t *testing.T) {
	g := newGateway(t, gwOptions{})
	// Served without a key, and not limited.
	var doc response
	for range 30 {
		doc = g.do(http.MethodGet, "/api/openapi.json", "", nil)
		if doc.status != 200 || doc.header.Get("Content-Type") != "application/json" {
			t.Fatalf("openapi.json: %d %v", doc.status, doc.header)
		}
	}
	if page := g.do(http.MethodGet, "/api/docs", "", nil); page.status != 200 || !strings.Contains(string(page.body), "Parley API") {
		t.Fatalf("docs: %d", page.status)
	}
	d, err := libopenapi.NewDocument(doc.body)
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(d)
	if len(errs) > 0 {
		t.Fatal(errs)
	}

	co := g.fresh()
	seg := g.conforms(v, true, "POST", "/api/segments/create", co.key, `{"name":"VIP","contacts":[{"phone":"+393330000001","first_name":"Ana"}]}`, 201)
	id := int64(seg.json(t)["id"].(float64))
	g.conforms(v, true, "POST", "/api/segments/create", co.key, `{"name":"VIP"}`, 409)
	g.conforms(v, false, "POST", "/api/segments/create", co.key, `{"name":""}`, 422)
	g.conforms(v, true, "POST", fmt.Sprintf("/api/segments/%d/contacts", id), co.key, `{"contacts":[{"phone":"+393330000002"}]}`, 200)
	g.conforms(v, true, "POST", fmt.Sprintf("/api/segments/%d/contacts", id), co.key, `{"contacts":[]}`, 429)
	g.conforms(v, true, "POST", "/api/segments/999999/contacts", g.fresh().key, `{"contacts":[]}`, 404)
	acc := g.conforms(v, true, "POST", "/api/campaigns/send", co.key, fmt.Sprintf(`{"campaign_id":%d,"segment_id":%d}`, co.campaign.ID, id), 202)
	g.conforms(v, true, "POST", "/api/campaigns/send", co.key, `{"campaign_id":999999,"contacts":["+393330000001"]}`, 404)
	g.conforms(v, false, "POST", "/api/campaigns/send", co.key, `{"campaign_id":1,"contacts":["1"]}`, 422)
	g.conforms(v, true, "POST", "/api/automations/send", co.key,
		fmt.Sprintf(`{"automation_id":%d,"contacts":[{"phone":"+393330000001","variables":{"order_id":"A-1"}}]}`, co.automation.ID), 202)
	g.conforms(v, true, "POST", "/api/batch/send", co.key, fmt.Sprintf(`{"messages":[{"phone":"+393330000001","campaign_id":%d}]}`, co.campaign.ID), 202)
	g.conforms(v, true, "POST", "/api/batch/send", co.key, `{"messages":[]}`, 429)
	if _, err := g.cat.CreateConnector(context.Background(), catalog.NewConnector{CompanyID: co.company.ID, Name: "shopify", Connected: true,
		TargetCampaignID: &co.campaign.ID}); err != nil {
		t.Fatal(err)
	}
	g.conforms(v, true, "POST", "/api/shopify/send", co.key, `{"contacts":[{"phone":"+393330000001"}]}`, 202)
	g.conforms(v, true, "POST", "/api/klaviyo/send", g.fresh().key, `{"contacts":[]}`, 404)
	g.conforms(v, false, "POST", "/api/campaigns/send", "", `{"campaign_id":1,"contacts":[]}`, 401)
	// The accepted batch is recorded in the background.
	batchID := acc.json(t)["batch_id"].(string)
	deadline := time.Now().Add(5 * time.Second)
	for g.do(http.MethodGet, "/api/batches/"+batchID, co.key, nil).status != 200 {
		if time.Now().After(deadline) {
			t.Fatal("the accepted batch was not recorded")
		}
		time.Sleep(20 * time.Millisecond)
	}
	g.conforms(v, true, "GET", "/api/batches/"+batchID, co.key, "", 200)
	g.conforms(v, true, "GET", "/api/batches/0193a5c4-7f1e-7cc2-9d5e-3b8f2a61c0de", co.key, "", 404)
	// No dispatcher runs here: the batch waits in the stream, and is
	// listed empty and cancelled there.
	g.conforms(v, true, "GET", "/api/batches/"+batchID+"/messages?state=queued&state=failed&limit=10", co.key, "", 200)
	g.conforms(v, false, "GET", "/api/batches/"+batchID+"/messages?limit=0", co.key, "", 422)
	g.conforms(v, true, "GET", "/api/batches/0193a5c4-7f1e-7cc2-9d5e-3b8f2a61c0de/messages", co.key, "", 404)
	g.conforms(v, true, "POST", "/api/batches/"+batchID+"/cancel", co.key, "{}", 200)
	g.conforms(v, true, "POST", "/api/batches/"+batchID+"/cancel", co.key, "", 200)
	g.conforms(v, true, "POST", "/api/batches/0193a5c4-7f1e-7cc2-9d5e-3b8f2a61c0de/cancel", co.key, "", 404)
	g.conforms(v, false, "POST", "/api/batches/"+batchID+"/cancel", co.key, "[1]", 422)
	// The cancel recorded the batch: it is listed.
	list := g.conforms(v, true, "GET", "/api/batches?kind=campaign&status=cancelled&limit=5", co.key, "", 200)
	if items := list.json(t)["batches"].([]any); len(items) != 1 || items[0].(map[string]any)["batch_id"] != batchID {
		t.Fatalf("listed %s, want the cancelled batch %s", list.body, batchID)
	}
	g.conforms(v, false, "GET", "/api/batches?status=done", co.key, "", 422)
	g.conforms(v, true, "GET", "/api/messages/12345", co.key, "", 404)
	g.conforms(v, true, "GET", "/api/contacts/+393330000001/messages?limit=5", co.key, "", 200)
	g.conforms(v, true, "GET", "/api/contacts/+15550000000/messages", co.key, "", 404)
	g.conforms(v, false, "GET", "/api/contacts/12/messages", co.key, "", 422)
	g.conforms(v, true, "GET", "/api/messages/wamid.HBgLMzkzMzMxMjM0NTY3FQIAERgSQ0Y2", co.key, "", 404)

	// Segments: list, read, rename, remove contacts, delete.
	path := fmt.Sprintf("/api/segments/%d", id)
	second := g.conforms(v, true, "POST", "/api/segments/create", co.key, `{"name":"Newsletter","contacts":[{"phone":"+393330000003"}]}`, 201)
	other := int64(second.json(t)["id"].(float64))
	g.conforms(v, true, "GET", "/api/segments?limit=1", co.key, "", 200)
	g.conforms(v, false, "GET", "/api/segments?limit=0", co.key, "", 422)
	g.conforms(v, true, "GET", path, co.key, "", 200)
	g.conforms(v, true, "GET", "/api/segments/999999", co.key, "", 404)
	g.conforms(v, true, "PATCH", path, co.key, `{"name":"VIP customers"}`, 200)
	g.conforms(v, true, "PATCH", path, co.key, `{"name":"Newsletter"}`, 409)
	g.conforms(v, false, "PATCH", path, co.key, `{"name":""}`, 422)
	g.conforms(v, true, "DELETE", path+"/contacts", co.key, `{"contacts":["+393330000002"]}`, 200)
	g.conforms(v, true, "DELETE", path+"/contacts", co.key, `{"contacts":[]}`, 429)
	g.conforms(v, false, "DELETE", path+"/contacts", g.fresh().key, `{"contacts":["1"]}`, 422)
	g.conforms(v, true, "DELETE", "/api/segments/999999/contacts", g.fresh().key, `{"contacts":[]}`, 404)
	box, err := secretbox.New(secretbox.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	sched := g.conforms(v, true, "POST", "/api/campaigns/send", co.key,
		fmt.Sprintf(`{"campaign_id":%d,"segment_id":%d,"scheduled_at":"2999-01-01T00:00:00Z"}`, co.campaign.ID, other), 202)
	g.expandBatch(delivery.NewExpander(g.pool, catalog.NewStore(g.pool, box), g.clock.now), co.company.ID, sched.json(t)["batch_id"].(string))
	g.conforms(v, true, "DELETE", fmt.Sprintf("/api/segments/%d", other), co.key, "", 409)
	g.conforms(v, true, "DELETE", path, co.key, "", 204)
	g.conforms(v, true, "DELETE", path, co.key, "", 404)
}
