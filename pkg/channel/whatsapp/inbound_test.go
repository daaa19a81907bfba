package whatsapp

import (
	"testing"
	"time"
)

func TestParseWebhookInbound(t *testing.T) {
	body := `{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[
	 {"field":"messages","value":{"messaging_product":"whatsapp","metadata":{"phone_number_id":"1001"},
	  "contacts":[{"profile":{"name":"Ada"},"wa_id":"393331111111"}],
	  "statuses":[{"id":"wamid.S","status":"delivered","timestamp":"1700000000","recipient_id":"393331111111"}],
	  "messages":[
	   {"from":"393331111111","id":"wamid.T","timestamp":"1700000001","type":"text","text":{"body":" STOP "}},
	   {"from":"393331111112","id":"wamid.B","timestamp":"1700000002","type":"button","button":{"payload":"STOP_PROMOTIONS","text":"Stop promotions"}},
	   {"from":"393331111113","id":"wamid.I","type":"interactive","interactive":{"type":"button_reply","button_reply":{"id":"OPT_OUT","title":"Stop"}}},
	   {"from":"393331111114","id":"wamid.X","type":"image","image":{"id":"9"}},
	   {"from":"393331111115","type":"text","text":{"body":"STOP"}},
	   {"from":"nope","id":"wamid.N","type":"text","text":{"body":"STOP"}},
	   {"from":"393331111116","id":"wamid.Y","type":"text","text":"STOP"},
	   7]}},
	 {"field":"messages","value":{"metadata":{"phone_number_id":"1001"},"messages":{"not":"an array"}}},
	 {"field":"account_update","value":{"messages":"whatever"}}]}]}`
	w, err := ParseWebhook([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Statuses) != 1 || w.Statuses[0].Status != StatusDelivered {
		t.Fatalf("statuses %+v", w.Statuses)
	}
	if w.Malformed != 5 {
		t.Fatalf("malformed %d, want 5", w.Malformed)
	}
	want := []InboundMessage{
		{PhoneNumberID: "1001", ID: "wamid.T", From: "+393331111111", Timestamp: time.Unix(1700000001, 0).UTC(), Type: "text", Text: " STOP ", ProfileName: "Ada"},
		{PhoneNumberID: "1001", ID: "wamid.B", From: "+393331111112", Timestamp: time.Unix(1700000002, 0).UTC(), Type: "button",
			ButtonPayload: "STOP_PROMOTIONS", ButtonText: "Stop promotions"},
		{PhoneNumberID: "1001", ID: "wamid.I", From: "+393331111113", Type: "interactive", ButtonPayload: "OPT_OUT", ButtonText: "Stop"},
		{PhoneNumberID: "1001", ID: "wamid.X", From: "+393331111114", Type: "image"},
	}
	if len(w.Messages) != len(want) {
		t.Fatalf("messages %+v", w.Messages)
	}
	for i := range want {
		if w.Messages[i] != want[i] {
			t.Errorf("message %d = %+v, want %+v", i, w.Messages[i], want[i])
		}
	}
	// ParseStatusWebhook still reads only the statuses.
	if st, err := ParseStatusWebhook([]byte(body)); err != nil || len(st) != 1 {
		t.Fatalf("%v %v", st, err)
	}
}
