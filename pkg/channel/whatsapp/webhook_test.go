package whatsapp_test

import (
	"errors"
	"net/url"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

func TestSignatureRoundTripAndTamper(t *testing.T) {
	const secret = "app-secret-1"
	body := []byte(`{"object":"whatsapp_business_account","entry":[]}`)
	sig := whatsapp.Sign(secret, body)
	if !strings.HasPrefix(sig, "sha256=") || len(sig) != len("sha256=")+64 {
		t.Fatalf("Sign = %q, want sha256=<64 hex>", sig)
	}
	if !whatsapp.VerifySignature(secret, body, sig) {
		t.Fatal("own signature does not verify")
	}
	// Meta's reference: HMAC-SHA256 of the raw body with the app secret,
	// hex encoded; upper-case hex is the same signature.
	if !whatsapp.VerifySignature(secret, body, "sha256="+strings.ToUpper(strings.TrimPrefix(sig, "sha256="))) {
		t.Error("upper-case hex rejected")
	}
	tampered := append([]byte(nil), body...)
	tampered[len(tampered)-2] = '1'
	flipped := []byte(sig)
	if flipped[len(flipped)-1] == '0' {
		flipped[len(flipped)-1] = '1'
	} else {
		flipped[len(flipped)-1] = '0'
	}
	for name, c := range map[string]struct {
		secret string
		body   []byte
		header string
	}{
		"tampered body":    {secret, tampered, sig},
		"tampered digest":  {secret, body, string(flipped)},
		"wrong secret":     {"app-secret-2", body, sig},
		"no prefix":        {secret, body, strings.TrimPrefix(sig, "sha256=")},
		"sha1 prefix":      {secret, body, "sha1=" + strings.TrimPrefix(sig, "sha256=")},
		"not hex":          {secret, body, "sha256=zz"},
		"truncated":        {secret, body, sig[:40]},
		"empty header":     {secret, body, ""},
		"empty secret":     {"", body, whatsapp.Sign("", body)},
		"signature of nil": {secret, body, whatsapp.Sign(secret, nil)},
	} {
		if whatsapp.VerifySignature(c.secret, c.body, c.header) {
			t.Errorf("%s: verified", name)
		}
	}
}

func TestVerifySubscription(t *testing.T) {
	q := func(mode, token, challenge string) url.Values {
		return url.Values{"hub.mode": {mode}, "hub.verify_token": {token}, "hub.challenge": {challenge}}
	}
	if c, ok := whatsapp.VerifySubscription(q("subscribe", "vt-1", "1158201444"), "vt-1"); !ok || c != "1158201444" {
		t.Fatalf("good handshake: %q %v", c, ok)
	}
	for name, v := range map[string]url.Values{
		"wrong token":       q("subscribe", "vt-2", "1158201444"),
		"wrong mode":        q("unsubscribe", "vt-1", "1158201444"),
		"no challenge":      q("subscribe", "vt-1", ""),
		"markup challenge":  q("subscribe", "vt-1", "<script>"),
		"too long":          q("subscribe", "vt-1", strings.Repeat("1", 129)),
		"nothing":           {},
		"empty token match": q("subscribe", "", "1"),
	} {
		token := "vt-1"
		if name == "empty token match" {
			token = ""
		}
		if c, ok := whatsapp.VerifySubscription(v, token); ok {
			t.Errorf("%s: accepted with %q", name, c)
		}
	}
}

func TestParseStatusWebhook(t *testing.T) {
	body, err := os.ReadFile("testdata/webhook_statuses.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := whatsapp.ParseStatusWebhook(body)
	if err != nil {
		t.Fatalf("ParseStatusWebhook: %v", err)
	}
	const wamid = "wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBJDQjZCMzlEQUE4OTJBMTE4RTUA"
	want := []whatsapp.StatusUpdate{
		{PhoneNumberID: "106540352242922", MessageID: wamid, Status: whatsapp.StatusSent, Timestamp: time.Unix(1750263773, 0).UTC(), RecipientID: "16505551234",
			Pricing: &whatsapp.Pricing{Billable: true, Category: "marketing", Model: "PMP"}},
		{PhoneNumberID: "106540352242922", MessageID: wamid, Status: whatsapp.StatusDelivered, Timestamp: time.Unix(1750263775, 0).UTC(), RecipientID: "16505551234",
			Pricing: &whatsapp.Pricing{Billable: true, Category: "marketing", Model: "PMP"}},
		{PhoneNumberID: "106540352242923", MessageID: "wamid.HBgLMzkzMzMxMjM0NTY3FQIAERgSQUJDREVGMDEyMzQ1Njc4OUEA", Status: whatsapp.StatusFailed,
			Timestamp: time.Unix(1750263790, 0).UTC(), RecipientID: "393331234567",
			Errors: []whatsapp.StatusError{{Code: 131026, Title: "Message undeliverable", Message: "Message undeliverable", Details: "Message Undeliverable."}}},
		{PhoneNumberID: "106540352242923", MessageID: wamid, Status: whatsapp.StatusRead, Timestamp: time.Unix(1750263800, 0).UTC(), RecipientID: "16505551234"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestParseStatusWebhookRejectsOtherBodies(t *testing.T) {
	for name, body := range map[string]string{
		"not JSON":       `{"object":`,
		"another object": `{"object":"page","entry":[]}`,
		"no object":      `{"entry":[]}`,
	} {
		if _, err := whatsapp.ParseStatusWebhook([]byte(body)); !errors.Is(err, whatsapp.ErrNotWhatsAppWebhook) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	// An inbound-only delivery is valid and has no statuses.
	got, err := whatsapp.ParseStatusWebhook([]byte(`{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages","value":{"messaging_product":"whatsapp","metadata":{"phone_number_id":"1"},"messages":[{"from":"1","type":"text"}]}}]}]}`))
	if err != nil || len(got) != 0 {
		t.Errorf("inbound only: %v %v", got, err)
	}
}

func TestStatusesNeverMoveBackwards(t *testing.T) {
	s, d, r, f := whatsapp.StatusSent, whatsapp.StatusDelivered, whatsapp.StatusRead, whatsapp.StatusFailed
	for _, c := range []struct {
		next, cur whatsapp.Status
		want      bool
	}{
		{s, "", true}, {s, "sending", true}, {d, s, true}, {r, d, true}, {r, s, true},
		{s, d, false}, {d, r, false}, {s, r, false}, {d, d, false},
		{f, s, true}, {f, "sending", true}, {f, d, false}, {f, r, false}, {f, f, false},
		{d, f, true}, {r, f, true}, {s, f, false},
		{"deleted", s, false},
	} {
		if got := whatsapp.Supersedes(c.next, c.cur); got != c.want {
			t.Errorf("Supersedes(%q, %q) = %v, want %v", c.next, c.cur, got, c.want)
		}
	}
	// Out of order arrival ends on the highest rank whatever the order.
	for _, order := range [][]whatsapp.Status{{s, d, r}, {r, d, s}, {d, r, s}, {s, r, d}} {
		var cur whatsapp.Status
		for _, st := range order {
			if whatsapp.Supersedes(st, cur) {
				cur = st
			}
		}
		if cur != r {
			t.Errorf("order %v ended on %q", order, cur)
		}
	}
}

// TestParseStatusPricing: per-message pricing's type says whether a message
// is charged; the deprecated billable counts only without a type.
func TestParseStatusPricing(t *testing.T) {
	status := func(pricing string) string {
		return `{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages","value":{
			"messaging_product":"whatsapp","metadata":{"phone_number_id":"106540352242922"},
			"statuses":[{"id":"wamid.1","status":"delivered","timestamp":"1750263775","recipient_id":"1650555","pricing":` + pricing + `}]}}]}]}`
	}
	for pricing, want := range map[string]*whatsapp.Pricing{
		`{"billable":true,"pricing_model":"PMP","category":"service","type":"free_customer_service"}`: {Billable: false, Category: "service", Model: "PMP"},
		`{"pricing_model":"PMP","category":"utility","type":"regular"}`:                               {Billable: true, Category: "utility", Model: "PMP"},
		`{"billable":true,"pricing_model":"CBP","category":"marketing"}`:                              {Billable: true, Category: "marketing", Model: "CBP"},
		`{"billable":true,"pricing_model":"PMP"}`:                                                     nil,
	} {
		got, err := whatsapp.ParseStatusWebhook([]byte(status(pricing)))
		if err != nil || len(got) != 1 {
			t.Fatalf("%s: %+v, %v", pricing, got, err)
		}
		if !reflect.DeepEqual(got[0].Pricing, want) {
			t.Errorf("%s: pricing %+v, want %+v", pricing, got[0].Pricing, want)
		}
	}
}

// The account webhooks (templates, numbers) come beside the messages ones:
// each known field is read with its WABA and time, others are skipped, and
// the messages in the same delivery are still read.
func TestParseAccountChanges(t *testing.T) {
	body := `{"object":"whatsapp_business_account","entry":[
	 {"id":"7001","time":1750000000,"changes":[
	  {"field":"message_template_status_update","value":{"event":"PAUSED","message_template_id":42,"message_template_name":"promo","message_template_language":"en_US","reason":"NONE","other_info":{"title":"FIRST_PAUSE","description":"until 2025-06-15T18:00:00Z"}}},
	  {"field":"message_template_quality_update","value":{"previous_quality_score":"GREEN","new_quality_score":"RED","message_template_id":42,"message_template_name":"promo","message_template_language":"en_US"}},
	  {"field":"template_category_update","value":{"message_template_id":42,"message_template_name":"promo","message_template_language":"en_US","previous_category":"UTILITY","new_category":"MARKETING"}},
	  {"field":"phone_number_quality_update","value":{"display_phone_number":"15550100001","event":"FLAGGED","current_limit":"TIER_2K"}},
	  {"field":"account_update","value":{"event":"VERIFIED_ACCOUNT"}},
	  {"field":"message_template_quality_update","value":"not an object"}]},
	 {"id":"","changes":[{"field":"template_category_update","value":{"new_category":"MARKETING"}}]},
	 {"id":"7001","changes":[{"field":"messages","value":{"metadata":{"phone_number_id":"1"},"statuses":[{"id":"wamid.1","status":"sent","recipient_id":"1555"}]}}]}]}`
	w, err := whatsapp.ParseWebhook([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Statuses) != 1 || len(w.Account) != 4 {
		t.Fatalf("statuses %d, account changes %d: %+v", len(w.Statuses), len(w.Account), w.Account)
	}
	at := time.Unix(1750000000, 0).UTC()
	s, q, c, p := w.Account[0], w.Account[1], w.Account[2], w.Account[3]
	if s.WABAID != "7001" || !s.At.Equal(at) || s.TemplateStatus == nil || s.TemplateStatus.Event != "PAUSED" ||
		s.TemplateStatus.MessageTemplateID != 42 || s.TemplateStatus.OtherInfo == nil || s.TemplateStatus.OtherInfo.Title != "FIRST_PAUSE" {
		t.Fatalf("status change %+v", s)
	}
	if q.TemplateQuality == nil || q.TemplateQuality.NewQualityScore != "RED" || c.TemplateCategory == nil || c.TemplateCategory.NewCategory != "MARKETING" {
		t.Fatalf("quality %+v, category %+v", q, c)
	}
	if p.PhoneNumberQuality == nil || p.PhoneNumberQuality.Event != "FLAGGED" || p.PhoneNumberQuality.DisplayPhoneNumber != "15550100001" {
		t.Fatalf("number change %+v", p)
	}
}
