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
		f.Add(c.Endpoint == "campaign", body)
	}
	f.Fuzz(func(t *testing.T, campaign bool, body []byte) {
		var err error
		if campaign {
			_, err = DecodeCampaignSend(body)
		} else {
			_, err = DecodeAutomationTrigger(body)
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
