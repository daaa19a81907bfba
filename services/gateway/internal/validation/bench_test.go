package validation

import (
	"encoding/json"
	"fmt"
	"testing"
)

func campaignBody(tb testing.TB, contacts int) []byte {
	phones := make([]string, contacts)
	for i := range phones {
		phones[i] = fmt.Sprintf("+39333%07d", i)
	}
	b, err := json.Marshal(map[string]any{
		"campaign_id":  1234,
		"contacts":     phones,
		"is_forced":    false,
		"scheduled_at": "2030-01-02T03:04:05+02:00",
	})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func automationBody(tb testing.TB, contacts int) []byte {
	cs := make([]map[string]any, contacts)
	for i := range cs {
		cs[i] = map[string]any{
			"phone":      fmt.Sprintf("+39333%07d", i),
			"first_name": "Ana",
			"last_name":  "Lima",
			"image_url":  "https://cdn.example.com/img/12345.png",
			"variables":  map[string]string{"order_id": fmt.Sprintf("A-%d", i), "amount": "12.50", "city": "São Paulo"},
		}
	}
	b, err := json.Marshal(map[string]any{
		"automation_id": 99,
		"contacts":      cs,
		"url":           "https://example.com/track?id=1",
	})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func BenchmarkDecodeCampaignSend10(b *testing.B) {
	benchDecode(b, campaignBody(b, 10), func(body []byte) error { _, err := DecodeCampaignSend(body); return err })
}

func BenchmarkDecodeCampaignSend1000(b *testing.B) {
	benchDecode(b, campaignBody(b, 1000), func(body []byte) error { _, err := DecodeCampaignSend(body); return err })
}

func BenchmarkDecodeAutomationTrigger50(b *testing.B) {
	benchDecode(b, automationBody(b, 50), func(body []byte) error { _, err := DecodeAutomationTrigger(body); return err })
}

// BenchmarkDecodeCampaignSendInvalid is the 422 path: three errors echoed.
func BenchmarkDecodeCampaignSendInvalid(b *testing.B) {
	body := []byte(`{"campaign_id":"x","contacts":["+1234567","123","+39 333"],"is_forced":"maybe"}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeCampaignSend(body); err == nil {
			b.Fatal("invalid body accepted")
		}
	}
}

func benchDecode(b *testing.B, body []byte, decode func([]byte) error) {
	if err := decode(body); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := decode(body); err != nil {
			b.Fatal(err)
		}
	}
}
