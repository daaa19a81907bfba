package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	liberrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/services/gateway/internal/apidoc"
	"github.com/parleyhq/parley/services/gateway/internal/validation"
)

func buildDoc(t *testing.T) (*apidoc.Document, map[string]any) {
	t.Helper()
	doc, err := apidoc.Build(DocLimits())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(doc.JSON, &m); err != nil {
		t.Fatalf("the document is not JSON: %v", err)
	}
	return doc, m
}

func newValidator(t *testing.T, doc *apidoc.Document) validator.Validator {
	t.Helper()
	d, err := libopenapi.NewDocument(doc.JSON)
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(d)
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	return v
}

// TestDocumentIsValidOpenAPI31 checks the document against the OpenAPI 3.1
// specification's schema and builds libopenapi's model of it.
func TestDocumentIsValidOpenAPI31(t *testing.T) {
	doc, m := buildDoc(t)
	if m["openapi"] != "3.1.0" || m["info"].(map[string]any)["version"] != "2.0.0" {
		t.Fatalf("openapi %v, version %v", m["openapi"], m["info"].(map[string]any)["version"])
	}
	d, err := libopenapi.NewDocument(doc.JSON)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.BuildV3Model(); err != nil {
		t.Fatalf("libopenapi model: %v", err)
	}
	ok, errs := newValidator(t, doc).ValidateDocument()
	if !ok {
		for _, e := range errs {
			t.Errorf("%s: %s", e.Message, e.Reason)
		}
	}
}

// operations lists "METHOD /path" of the document.
func operations(m map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for path, item := range m["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			if o, ok := op.(map[string]any); ok {
				out[strings.ToUpper(method)+" "+path] = o
			}
		}
	}
	return out
}

func testEngine(t *testing.T, doc *apidoc.Document) *gin.Engine {
	t.Helper()
	gin.SetMode(gin.ReleaseMode)
	h := New(Config{MaxBodyBytes: 1 << 20}, Deps{Metrics: prometheus.NewRegistry(), Log: zap.NewNop(), Docs: doc})
	e, ok := h.(*gin.Engine)
	if !ok {
		t.Fatalf("New returned %T", h)
	}
	return e
}

// TestDocumentCoversEveryRoute: the routes gin serves and the document's
// operations are the same set, and every limited route carries its limit.
func TestDocumentCoversEveryRoute(t *testing.T) {
	doc, m := buildDoc(t)
	ops := operations(m)
	served := map[string]bool{}
	for _, r := range testEngine(t, doc).Routes() {
		served[r.Method+" "+apidoc.OpenAPIPath(r.Path)] = true
	}
	var missing, extra []string
	for k := range served {
		if ops[k] == nil {
			missing = append(missing, k)
		}
	}
	for k := range ops {
		if !served[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("served but not documented: %v; documented but not served: %v", missing, extra)
	}
	limited := map[string]Route{}
	for _, r := range Routes {
		limited[r.Method+" "+apidoc.OpenAPIPath(r.Path)] = r
	}
	for k, op := range ops {
		r, isLimited := limited[k]
		sec, hasSec := op["security"].([]any)
		public := hasSec && len(sec) == 0
		if public == isLimited {
			t.Errorf("%s: public %v but limited %v (every route that takes a key is limited)", k, public, isLimited)
		}
		ext, _ := op["x-ratelimit"].(map[string]any)
		if !isLimited {
			if ext != nil {
				t.Errorf("%s: x-ratelimit on an unlimited route", k)
			}
			continue
		}
		want := "Rate limit exceeded: " + r.Limit.String()
		if ext == nil || ext["exceeded"] != want || ext["requests"] != float64(r.Limit.Rate) || ext["period_seconds"] != r.Limit.Period.Seconds() {
			t.Errorf("%s: x-ratelimit %v, want %d per %s", k, ext, r.Limit.Rate, r.Limit.Period)
		}
		resp, _ := op["responses"].(map[string]any)["429"].(map[string]any)
		ex, _ := resp["content"].(map[string]any)["application/json"].(map[string]any)["example"].(map[string]any)
		if ex["error"] != want {
			t.Errorf("%s: 429 example %v, want %q", k, ex, want)
		}
		if !strings.Contains(op["description"].(string), want) {
			t.Errorf("%s: description does not state the limit", k)
		}
	}
	desc := m["info"].(map[string]any)["description"].(string)
	for _, r := range Routes {
		if !strings.Contains(desc, "`"+r.Method+" "+apidoc.OpenAPIPath(r.Path)+"`") {
			t.Errorf("info.description does not list the limit of %s %s", r.Method, r.Path)
		}
	}
}

// example is one example value of the document, where it was found.
type example struct {
	where     string
	opID      string
	method    string
	path      string // with path parameters filled in from their examples
	status    string // "" for a request body
	mediaType string
	value     any
}

func examples(m map[string]any) []example {
	var out []example
	for key, op := range operations(m) {
		method, path, _ := strings.Cut(key, " ")
		opID, _ := op["operationId"].(string)
		for _, p := range asList(op["parameters"]) {
			pm := deref(m, p)
			if pm["in"] == "path" {
				path = strings.ReplaceAll(path, "{"+pm["name"].(string)+"}", fmt.Sprint(pm["example"]))
			}
		}
		collect := func(status string, content map[string]any) {
			for mt, media := range content {
				mm := media.(map[string]any)
				if v, ok := mm["example"]; ok {
					out = append(out, example{key + " " + status + " example", opID, method, path, status, mt, v})
				}
				if exs, ok := mm["examples"].(map[string]any); ok {
					for name, e := range exs {
						out = append(out, example{key + " " + status + " " + name, opID, method, path, status, mt, deref(m, e)["value"]})
					}
				}
			}
		}
		if rb := deref(m, op["requestBody"]); rb != nil {
			collect("", rb["content"].(map[string]any))
		}
		for status, r := range op["responses"].(map[string]any) {
			if c, ok := deref(m, r)["content"].(map[string]any); ok {
				collect(status, c)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].where < out[j].where })
	return out
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// deref follows a local $ref.
func deref(m map[string]any, v any) map[string]any {
	o, _ := v.(map[string]any)
	for i := 0; o != nil && i < 8; i++ {
		ref, ok := o["$ref"].(string)
		if !ok {
			return o
		}
		var cur any = m
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			cur = cur.(map[string]any)[part]
		}
		o, _ = cur.(map[string]any)
	}
	return o
}

// TestRequestExamplesPassTheGatewaysValidation decodes every request
// example through the decoder its endpoint uses.
func TestRequestExamplesPassTheGatewaysValidation(t *testing.T) {
	_, m := buildDoc(t)
	decoders := map[string]func(path string, body []byte) error{
		"sendCampaign":      func(_ string, b []byte) error { _, err := decodeCampaignSend(b, "application/json"); return err },
		"triggerAutomation": func(_ string, b []byte) error { _, err := decodeAutomationTrigger(b, "application/json"); return err },
		"createSegment":     func(_ string, b []byte) error { _, err := decodeSegmentCreate(b, "application/json"); return err },
		"addSegmentContacts": func(p string, b []byte) error {
			id := strings.Split(p, "/")[3]
			r, err := decodeSegmentContacts(id, b, "application/json")
			if err == nil && strconv.FormatInt(r.segmentID, 10) != id {
				return fmt.Errorf("segment id %d from path %s", r.segmentID, p)
			}
			return err
		},
		"renameSegment": func(_ string, b []byte) error {
			_, err := decodeJSON(b, "application/json", validation.DecodeSegmentRename)
			return err
		},
		"removeSegmentContacts": func(_ string, b []byte) error {
			_, err := decodeJSON(b, "application/json", validation.DecodeSegmentRemove)
			return err
		},
		"sendBatch":        func(_ string, b []byte) error { _, err := decodeBatchSend(b, "application/json"); return err },
		"sendViaConnector": func(_ string, b []byte) error { _, err := decodeConnectorSend(b, "application/json"); return err },
		"sendMessage": func(_ string, b []byte) error {
			_, probs, err := decodeReply(b, "application/json")
			if err == nil && len(probs) > 0 {
				err = fmt.Errorf("%+v", probs)
			}
			return err
		},
		"receiveWhatsAppStatuses": func(_ string, b []byte) error {
			w, err := whatsapp.ParseWebhook(b)
			if err == nil && (len(w.Messages) == 0 || w.Malformed > 0) {
				err = fmt.Errorf("the example's inbound messages do not read: %+v", w)
			}
			return err
		},
	}
	n := 0
	for _, ex := range examples(m) {
		if ex.status != "" || ex.mediaType != "application/json" {
			continue
		}
		dec := decoders[ex.opID]
		if dec == nil {
			t.Errorf("%s: no decoder for operation %s", ex.where, ex.opID)
			continue
		}
		body, err := json.Marshal(ex.value)
		if err != nil {
			t.Fatal(err)
		}
		if err := dec(ex.path, body); err != nil {
			t.Errorf("%s: the gateway refuses its own example: %v", ex.where, err)
		}
		n++
	}
	if n < len(decoders) {
		t.Fatalf("%d request examples for %d endpoints with a body", n, len(decoders))
	}
}

// TestExamplesMatchTheirSchemas validates every example, request and
// response, against the document with libopenapi-validator, as a request
// or response on the wire.
func TestExamplesMatchTheirSchemas(t *testing.T) {
	doc, m := buildDoc(t)
	v := newValidator(t, doc)
	responses := 0
	for _, ex := range examples(m) {
		var body []byte
		if s, ok := ex.value.(string); ok && ex.mediaType != "application/json" {
			body = []byte(s)
		} else {
			var err error
			if body, err = json.Marshal(ex.value); err != nil {
				t.Fatal(err)
			}
		}
		req := httptest.NewRequest(ex.method, "http://127.0.0.1:8080"+ex.path, nil)
		req.Header.Set("service-api-key", "service_abc_def")
		if ex.status == "" {
			req = httptest.NewRequest(ex.method, "http://127.0.0.1:8080"+ex.path, bytes.NewReader(body))
			req.Header.Set("service-api-key", "service_abc_def")
			req.Header.Set("Content-Type", ex.mediaType)
			req.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64)) // the webhook's
			if ok, errs := v.ValidateHttpRequest(req); !ok {
				t.Errorf("%s: %s", ex.where, describe(errs))
			}
			continue
		}
		if strings.HasPrefix(ex.path, "/webhooks/") && ex.method == http.MethodGet {
			req = httptest.NewRequest(ex.method, "http://127.0.0.1:8080"+ex.path+"?hub.mode=subscribe&hub.verify_token=t&hub.challenge=1", nil)
		}
		status, _ := strconv.Atoi(ex.status)
		resp := &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {ex.mediaType}},
			Body: ioNopCloser(body), Request: req}
		if ok, errs := v.ValidateHttpResponse(req, resp); !ok {
			t.Errorf("%s: %s\n%s", ex.where, describe(errs), body)
		}
		responses++
	}
	if responses < 30 {
		t.Fatalf("only %d response examples", responses)
	}
}

// TestDocsAreServed: both documents without a key, cacheable, revalidated.
func TestDocsAreServed(t *testing.T) {
	doc, _ := buildDoc(t)
	e := testEngine(t, doc)
	for path, ct := range map[string]string{OpenAPIPath: "application/json", DocsPath: "text/html; charset=utf-8"} {
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != 200 || w.Header().Get("Content-Type") != ct || w.Header().Get("ETag") != doc.ETag ||
			w.Header().Get("Cache-Control") != "public, max-age=300" {
			t.Fatalf("%s: %d %v", path, w.Code, w.Header())
		}
		w = httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.Header.Set("If-None-Match", doc.ETag)
		e.ServeHTTP(w, r)
		if w.Code != http.StatusNotModified || w.Body.Len() != 0 {
			t.Fatalf("%s revalidated: %d", path, w.Code)
		}
	}
	w := httptest.NewRecorder()
	e.ServeHTTP(w, httptest.NewRequest(http.MethodGet, DocsPath, nil))
	csp := w.Header().Get("Content-Security-Policy")
	if !strings.Contains(csp, "style-src '"+doc.StyleHash+"'") || !strings.Contains(csp, "default-src 'none'") {
		t.Fatalf("CSP %q", csp)
	}
	page := w.Body.String()
	for _, want := range []string{"<title>Parley API 2.0.0</title>", `id="sendBatch"`, `id="schema-BatchMessage"`,
		"1 request every 10 seconds per company", "curl -sS -X POST", `href="openapi.json"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	// Self-contained: nothing is loaded from elsewhere.
	for _, banned := range []string{"<script", "src=", "<link", "@import", "url("} {
		if strings.Contains(page, banned) {
			t.Errorf("the page contains %q", banned)
		}
	}
}

func ioNopCloser(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }

func describe(errs []*liberrors.ValidationError) string {
	var parts []string
	for _, e := range errs {
		s := e.Message + ": " + e.Reason
		for _, se := range e.SchemaValidationErrors {
			s += " [" + se.FieldPath + " " + se.KeywordLocation + ": " + se.Reason + "]"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}
