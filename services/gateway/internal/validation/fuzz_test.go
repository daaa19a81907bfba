package validation

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzDecode checks what must hold for any body: no panic, and an answer
// the HTTP layer can write (a decoded request, a 422 whose body is valid
// JSON with one detail item per Item, or the 400 sentinel).
func FuzzDecode(f *testing.F) {
	for _, c := range loadReference(f).Cases {
		body := c.body(f)
		if len(body) > 2048 {
			continue
		}
		f.Add(endpointIndex(c.Endpoint), c.Path, body)
	}
	f.Fuzz(func(t *testing.T, endpoint uint8, path string, body []byte) {
		var err error
		switch endpoint % 6 {
		case 0:
			_, err = DecodeCampaignSend(body)
		case 1:
			_, err = DecodeAutomationTrigger(body)
		case 2:
			_, err = DecodeSegmentCreate(body)
		case 3:
			_, err = DecodeSegmentContacts(path, body, true)
		case 4:
			_, err = DecodeBatchSend(body)
		default:
			_, err = DecodeConnectorSend(body)
		}
		if err == nil {
			return
		}
		var verr *Errors
		if !errors.As(err, &verr) {
			if !errors.Is(err, ErrBodyUnparseable) {
				t.Fatalf("unexpected error type %T: %v", err, err)
			}
			return
		}
		var out struct {
			Detail []map[string]json.RawMessage `json:"detail"`
		}
		if err := json.Unmarshal(verr.Body(), &out); err != nil {
			t.Fatalf("422 body is not JSON: %v\n%s", err, verr.Body())
		}
		if len(out.Detail) == 0 || len(out.Detail) != len(verr.Items) {
			t.Fatalf("%d detail items for %d Items", len(out.Detail), len(verr.Items))
		}
		for i, it := range verr.Items {
			if string(out.Detail[i]["input"]) != string(it.Input) {
				t.Fatalf("item %d input %s, body has %s", i, it.Input, out.Detail[i]["input"])
			}
			if !json.Valid(it.Input) || (it.Ctx != nil && !json.Valid(it.Ctx)) {
				t.Fatalf("item %d: invalid input or ctx JSON", i)
			}
		}
	})
}

func endpointIndex(name string) uint8 {
	for i, n := range []string{"campaign", "automation", "segment_create", "segment_contacts", "batch", "connector"} {
		if n == name {
			return uint8(i)
		}
	}
	panic("unknown endpoint " + name)
}
