package httpapi

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	"github.com/pb33f/libopenapi-validator/schema_validation"

	"github.com/parleyhq/parley/pkg/events"
	"github.com/parleyhq/parley/pkg/webhooks"
)

// TestDocumentWebhooksAreTheEvents holds the document's top-level webhooks
// to the code: one entry per event type (and the test event), each a POST
// with the three Standard Webhooks headers, whose example and whose body as
// Parley builds it (webhooks.MarshalBody of the sample data, the payloads of
// pkg/events) validate against its schema.
func TestDocumentWebhooksAreTheEvents(t *testing.T) {
	doc, m := buildDoc(t)
	d, err := libopenapi.NewDocument(doc.JSON)
	if err != nil {
		t.Fatal(err)
	}
	model, err := d.BuildV3Model()
	if err != nil {
		t.Fatalf("libopenapi model: %v", err)
	}
	want := []string{webhooks.TestEventType}
	for _, ty := range events.Types {
		want = append(want, string(ty))
	}
	var got []string
	for name := range model.Model.Webhooks.KeysFromOldest() {
		got = append(got, name)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("document webhooks %v, want the event types %v", got, want)
	}

	v := schema_validation.NewSchemaValidator()
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	for name, item := range model.Model.Webhooks.FromOldest() {
		op := item.Post
		if op == nil || op.RequestBody == nil {
			t.Errorf("%s: no POST with a body", name)
			continue
		}
		var headers []string
		for _, p := range op.Parameters {
			if p.In == "header" && p.Required != nil && *p.Required {
				headers = append(headers, p.Name)
			}
		}
		if strings.Join(headers, ",") != "webhook-id,webhook-timestamp,webhook-signature" {
			t.Errorf("%s: required headers %v", name, headers)
		}
		media, ok := op.RequestBody.Content.Get("application/json")
		if !ok || media.Schema == nil {
			t.Errorf("%s: no application/json schema", name)
			continue
		}
		schema := media.Schema.Schema()
		raw := m["webhooks"].(map[string]any)[name].(map[string]any)["post"].(map[string]any)["requestBody"].(map[string]any)
		example, err := json.Marshal(raw["content"].(map[string]any)["application/json"].(map[string]any)["example"])
		if err != nil {
			t.Fatal(err)
		}
		sent, err := webhooks.MarshalBody(name, at, webhooks.SampleData(name, at))
		if err != nil {
			t.Fatal(err)
		}
		for what, body := range map[string][]byte{"example": example, "Parley's body": sent} {
			if ok, errs := v.ValidateSchemaBytes(schema, body); !ok {
				for _, e := range errs {
					t.Errorf("%s %s %s: %s %s", name, what, body, e.Message, e.Reason)
				}
			}
			var env struct{ Type string }
			if err := json.Unmarshal(body, &env); err != nil || env.Type != name {
				t.Errorf("%s %s has type %q", name, what, env.Type)
			}
		}
		// A body of another type does not pass for this one.
		other := "message.sent"
		if name == other {
			other = "batch.completed"
		}
		wrong, _ := webhooks.MarshalBody(other, at, webhooks.SampleData(other, at))
		if ok, _ := v.ValidateSchemaBytes(schema, wrong); ok {
			t.Errorf("%s: a %s body validates against its schema", name, other)
		}
	}
}
