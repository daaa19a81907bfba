package validation

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestDecodeCampaignSendValues(t *testing.T) {
	body := []byte(`{"campaign_id":"42","contacts":["+393331234567","393331234567"],"is_forced":"yes","scheduled_at":"2030-01-02T03:04:05.5+02:00"}`)
	got, err := DecodeCampaignSend(body)
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2030, 1, 2, 1, 4, 5, 500_000_000, time.UTC)
	if got.CampaignID != 42 || !got.IsForced || len(got.Contacts) != 2 || got.ScheduledAt == nil || !got.ScheduledAt.Equal(want) {
		t.Fatalf("decoded %+v (scheduled %v)", got, got.ScheduledAt)
	}
	if got.ScheduledAt.Location() != time.UTC {
		t.Fatalf("scheduled_at in %v, want UTC", got.ScheduledAt.Location())
	}
}

func TestDecodeBigIDIsUnknown(t *testing.T) {
	got, err := DecodeAutomationTrigger([]byte(`{"automation_id":123456789012345678901234567890,"contacts":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got.AutomationID != UnknownID {
		t.Fatalf("automation_id %d, want UnknownID", got.AutomationID)
	}
}

// The decoded strings must not alias the caller's buffer, which the HTTP
// layer may reuse.
func TestDecodedStringsOwnTheirBytes(t *testing.T) {
	body := []byte(`{"automation_id":1,"contacts":[{"phone":"+1234567","first_name":"Ana","variables":{"k":"v\u00e9"}}]}`)
	got, err := DecodeAutomationTrigger(body)
	if err != nil {
		t.Fatal(err)
	}
	for i := range body {
		body[i] = 'x'
	}
	c := got.Contacts[0]
	if v, ok := c.Variables.Get("k"); c.Phone != "+1234567" || c.FirstName.V != "Ana" || !ok || v != "vé" {
		t.Fatalf("decoded values changed with the buffer: %+v", c)
	}
}

// Decoders are pooled: concurrent requests must not see each other's data.
func TestConcurrentDecodes(t *testing.T) {
	const workers, rounds = 8, 200
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				id := w*rounds + r
				phone := fmt.Sprintf("+39333%07d", id)
				if r%3 == 0 {
					_, err := DecodeCampaignSend([]byte(fmt.Sprintf(`{"campaign_id":%d,"contacts":["%s","bad-%d"]}`, id, phone, id)))
					var verr *Errors
					if !errors.As(err, &verr) || string(verr.Items[0].Input) != fmt.Sprintf(`"bad-%d"`, id) {
						errs <- fmt.Errorf("worker %d round %d: %v", w, r, err)
						return
					}
					continue
				}
				got, err := DecodeCampaignSend([]byte(fmt.Sprintf(`{"campaign_id":%d,"contacts":["%s"]}`, id, phone)))
				if err != nil || got.CampaignID != int64(id) || got.Contacts[0] != phone {
					errs <- fmt.Errorf("worker %d round %d: %+v %v", w, r, got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestErrorsAPI(t *testing.T) {
	_, err := DecodeCampaignSend([]byte(`{"campaign_id":"x","contacts":["+1 555 0100"],"scheduled_at":"soon"}`))
	var verr *Errors
	if !errors.As(err, &verr) {
		t.Fatalf("error %T %v, want *Errors", err, err)
	}
	if len(verr.Items) != 3 {
		t.Fatalf("%d items, want 3: %s", len(verr.Items), verr.Body())
	}
	it := verr.Items[1]
	if it.Type != "string_pattern_mismatch" || fmt.Sprint(it.Loc) != "[body contacts 0]" ||
		string(it.Input) != `"+1 555 0100"` || string(it.Ctx) != `{"pattern":"^\\+?[1-9]\\d{6,14}$"}` {
		t.Fatalf("item %+v", it)
	}
	if verr.Items[0].Ctx != nil {
		t.Fatalf("int_parsing has ctx %s", verr.Items[0].Ctx)
	}
	marshalled, err := json.Marshal(verr)
	if err != nil || string(marshalled) != string(verr.Body()) {
		t.Fatalf("MarshalJSON = %s, %v", marshalled, err)
	}
	// The message is for logs: types and locations, never inputs.
	msg := verr.Error()
	if strings.Contains(msg, "555") || !strings.Contains(msg, "body.contacts.0: string_pattern_mismatch") {
		t.Fatalf("Error() = %q", msg)
	}
}

func TestUnparseableBodies(t *testing.T) {
	for name, body := range map[string][]byte{
		"not utf-8":       []byte("{\"campaign_id\":\xff}"),
		"too deep":        []byte(strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)),
		"4301-digit int":  []byte(`{"campaign_id":` + strings.Repeat("7", maxIntDigits+1) + `}`),
		"odd-size utf-16": {0xFF, 0xFE, '{', 0, '}'},
	} {
		_, err := DecodeCampaignSend(body)
		if !errors.Is(err, ErrBodyUnparseable) {
			t.Errorf("%s: error %v, want ErrBodyUnparseable", name, err)
		}
	}
	if !errors.Is(ErrBodyNotUTF8, ErrBodyUnparseable) {
		t.Error("ErrBodyNotUTF8 is not an ErrBodyUnparseable")
	}
}

func TestIsJSONContentType(t *testing.T) {
	for header, want := range map[string]bool{
		"":                                  true,
		"application/json":                  true,
		"Application/JSON; charset=utf-8":   true,
		"application/problem+json":          true,
		" application/json ":                true,
		"text/json":                         false,
		"application/json5":                 false,
		"application/x-www-form-urlencoded": false,
		"application":                       false,
		"application/json/x":                false,
		"multipart/form-data; boundary=x":   false,
	} {
		if got := IsJSONContentType(header); got != want {
			t.Errorf("IsJSONContentType(%q) = %v, want %v", header, got, want)
		}
	}
}

func TestNonJSONBody(t *testing.T) {
	var verr *Errors
	if err := NonJSONBody([]byte("a=1&b=\"2\"")); !errors.As(err, &verr) ||
		string(verr.Body()) != `{"detail":[{"type":"model_attributes_type","loc":["body"],"msg":"Input should be a valid dictionary or object to extract fields from","input":"a=1&b=\"2\""}]}` {
		t.Fatalf("NonJSONBody: %v", err)
	}
	if err := NonJSONBody([]byte{0xff}); !errors.Is(err, ErrBodyNotUTF8) {
		t.Fatalf("NonJSONBody(non-UTF-8) = %v", err)
	}
}

func TestPyFloatRepr(t *testing.T) {
	for f, want := range map[float64]string{
		1:                      "1.0",
		-2.5:                   "-2.5",
		1e16:                   "1e+16",
		1e15:                   "1000000000000000.0",
		1e-5:                   "1e-05",
		0.0001:                 "0.0001",
		0.30000000000000004:    "0.30000000000000004",
		math.MaxFloat64:        "1.7976931348623157e+308",
		5e-324:                 "5e-324",
		123456789.123:          "123456789.123",
		math.Copysign(0, -1):   "-0.0",
		math.Inf(1):            "null",
		-9.223372036854776e+18: "-9.223372036854776e+18",
	} {
		if got := string(appendPyFloat(nil, f)); got != want {
			t.Errorf("repr(%v) = %s, want %s", f, got, want)
		}
	}
}
