package apidoc

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestOpenAPIPath(t *testing.T) {
	for in, want := range map[string]string{
		"/api/campaigns/send":                "/api/campaigns/send",
		"/api/segments/:segment_id/contacts": "/api/segments/{segment_id}/contacts",
		"/api/:connector/send":               "/api/{connector}/send",
	} {
		if got := OpenAPIPath(in); got != want {
			t.Errorf("OpenAPIPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestBuildRefusesALimitWithoutItsOperation(t *testing.T) {
	_, err := Build([]Limit{{Method: "POST", Path: "/api/nowhere", Name: "x", Rate: 1, Period: time.Second, Text: "1 per 1 second"}})
	if err == nil || !strings.Contains(err.Error(), "/api/nowhere") {
		t.Fatalf("err = %v", err)
	}
}

func TestBuildAddsTheLimit(t *testing.T) {
	doc, err := Build([]Limit{{Method: "POST", Path: "/api/batch/send", Name: "batch_send", Rate: 1, Period: 10 * time.Second, Text: "1 per 10 second"}})
	if err != nil {
		t.Fatal(err)
	}
	js := string(doc.JSON)
	for _, want := range []string{`"x-ratelimit"`, `"exceeded": "Rate limit exceeded: 1 per 10 second"`, `"period_seconds": 10`,
		"- `POST /api/batch/send`: 1 request every 10 seconds", `"$ref": "#/components/schemas/RateLimitError"`} {
		if !strings.Contains(js, want) {
			t.Errorf("document lacks %s", want)
		}
	}
	if strings.Contains(js, rateLimitsMarker) {
		t.Error("the marker is left in the document")
	}
	if !strings.HasPrefix(doc.StyleHash, "sha256-") || len(doc.ETag) < 10 {
		t.Fatalf("hash %q etag %q", doc.StyleHash, doc.ETag)
	}
	// Keys stay in the order written: the paths as in openapi.yaml.
	if strings.Index(js, `"/api/campaigns/send"`) > strings.Index(js, `"/api/automations/send"`) {
		t.Error("paths reordered")
	}
}

func TestMarkdownIsEscaped(t *testing.T) {
	got := md("### Title <b>\n\nA `<code>` **bold** [link](https://x.example/a) [bad](javascript:alert(1)) <script>\n\n- one\n  continued\n- two")
	want := "<h3>Title &lt;b&gt;</h3><p>A <code>&lt;code&gt;</code> <strong>bold</strong> <a href=\"https://x.example/a\">link</a> " +
		"[bad](javascript:alert(1)) &lt;script&gt;</p><ul><li>one continued</li><li>two</li></ul>"
	if got != want {
		t.Fatalf("md:\n got %s\nwant %s", got, want)
	}
}

func TestParseRefusesWhatJSONCannotSay(t *testing.T) {
	for _, src := range []string{"a: &x 1\nb: *x\n", "a: 0x10\n", "a: .inf\n", "a: 1\na: 2\n", "- 1\n"} {
		if _, err := parse([]byte(src)); err == nil {
			t.Errorf("parse(%q) accepted", src)
		}
	}
	o, err := parse([]byte("a: \"2.0.0\"\nb: 2.0.0\nc: 10\nd: 1.5\ne: null\nf: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if o.get("a") != "2.0.0" || o.get("b") != "2.0.0" || string(o.get("c").(json.Number)) != "10" || o.get("e") != nil || o.get("f") != true {
		t.Fatalf("parsed %v", o.vals)
	}
}

// The rendered page lists the events Parley sends under their tag.
func TestPageRendersTheWebhooks(t *testing.T) {
	doc, err := Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	page := string(doc.HTML)
	for _, want := range []string{`id="onMessageFailed"`, `<span class="path">message.failed</span>`, `id="tag-events"`,
		"sent by Parley to your endpoint, signed", "webhook-signature"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
}
