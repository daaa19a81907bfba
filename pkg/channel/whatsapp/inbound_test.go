package whatsapp

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
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
	   {"from":"393331111117","id":"wamid.E","type":"image"},
	   {"from":"393331111118","id":"wamid.L","type":"interactive","interactive":{"type":"list_reply"}},
	   {"from":"393331111119","id":"wamid.C","type":"contacts","contacts":{"name":"not an array"}},
	   {"from":"393331111110","id":"wamid.0","text":{"body":"no type"}},
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
	if w.Malformed != 9 {
		t.Fatalf("malformed %d, want 9", w.Malformed)
	}
	want := []InboundMessage{
		{PhoneNumberID: "1001", ID: "wamid.T", From: "+393331111111", Timestamp: time.Unix(1700000001, 0).UTC(), Type: "text", Text: " STOP ", ProfileName: "Ada",
			Content: InboundContent{Type: "text", Text: &InboundText{Body: " STOP "}}},
		{PhoneNumberID: "1001", ID: "wamid.B", From: "+393331111112", Timestamp: time.Unix(1700000002, 0).UTC(), Type: "button",
			ButtonPayload: "STOP_PROMOTIONS", ButtonText: "Stop promotions",
			Content: InboundContent{Type: "button", Button: &InboundButton{Payload: "STOP_PROMOTIONS", Text: "Stop promotions"}}},
		{PhoneNumberID: "1001", ID: "wamid.I", From: "+393331111113", Type: "interactive", ButtonPayload: "OPT_OUT", ButtonText: "Stop",
			Content: InboundContent{Type: "interactive", Interactive: &InboundInteractive{Type: "button_reply", ID: "OPT_OUT", Title: "Stop"}}},
		{PhoneNumberID: "1001", ID: "wamid.X", From: "+393331111114", Type: "image", Content: InboundContent{Type: "image", Image: &InboundMedia{ID: "9"}}},
	}
	if !reflect.DeepEqual(w.Messages, want) {
		t.Errorf("messages\n got %+v\nwant %+v", w.Messages, want)
	}
	// ParseStatusWebhook still reads only the statuses.
	if st, err := ParseStatusWebhook([]byte(body)); err != nil || len(st) != 1 {
		t.Fatalf("%v %v", st, err)
	}
}

// TestInboundOfEveryType reads one fixture per type the Cloud API
// delivers (testdata/inbound_*.json, shaped like Meta's webhook reference
// examples).
func TestInboundOfEveryType(t *testing.T) {
	const wamid = "wamid.HBgNNTUxMTk4NzY1NDMyMRUCABIYFjNFQjBDNzQy"
	const business = "wamid.HBgNNTUxMTk4NzY1NDMyMRUCABEYEkJVU0lORVNTMDAx"
	tests := []struct {
		file    string
		id      string
		context string
		content InboundContent
		// The compatibility fields the opt-out keywords read.
		text, payload, buttonText string
		json, summary             string
	}{
		{file: "text", id: "01", context: business,
			content: InboundContent{Type: "text", Text: &InboundText{Body: "Is my order shipped?\nIt was due Monday."}},
			text:    "Is my order shipped?\nIt was due Monday.",
			json:    `{"type":"text","text":{"body":"Is my order shipped?\nIt was due Monday."}}`,
			summary: "Is my order shipped? It was due Monday."},
		{file: "button", id: "02", context: business,
			content: InboundContent{Type: "button", Button: &InboundButton{Payload: "TRACK_ORDER", Text: "Track my order"}},
			payload: "TRACK_ORDER", buttonText: "Track my order",
			json:    `{"type":"button","button":{"payload":"TRACK_ORDER","text":"Track my order"}}`,
			summary: "Track my order"},
		{file: "interactive_button_reply", id: "03", context: business,
			content: InboundContent{Type: "interactive", Interactive: &InboundInteractive{Type: "button_reply", ID: "slot-tomorrow", Title: "Tomorrow"}},
			payload: "slot-tomorrow", buttonText: "Tomorrow",
			json:    `{"type":"interactive","interactive":{"type":"button_reply","id":"slot-tomorrow","title":"Tomorrow"}}`,
			summary: "Tomorrow"},
		{file: "interactive_list_reply", id: "04", context: business,
			content: InboundContent{Type: "interactive", Interactive: &InboundInteractive{Type: "list_reply", ID: "express", Title: "Express", Description: "Next business day"}},
			payload: "express", buttonText: "Express",
			json:    `{"type":"interactive","interactive":{"type":"list_reply","id":"express","title":"Express","description":"Next business day"}}`,
			summary: "Express"},
		{file: "image", id: "05",
			content: InboundContent{Type: "image", Image: &InboundMedia{ID: "1283746502918374", MimeType: "image/jpeg", SHA256: "7b5e2a0d9c1f4e8b6a3d2c1b0a9f8e7d6c5b4a392817161514131211100f0e0d", Caption: "The box arrived damaged"}},
			json:    `{"type":"image","image":{"id":"1283746502918374","mime_type":"image/jpeg","sha256":"7b5e2a0d9c1f4e8b6a3d2c1b0a9f8e7d6c5b4a392817161514131211100f0e0d","caption":"The box arrived damaged"}}`,
			summary: "[image] The box arrived damaged"},
		{file: "video", id: "06",
			content: InboundContent{Type: "video", Video: &InboundMedia{ID: "2938475610293847", MimeType: "video/mp4", SHA256: "0d0e0f101112131415161718292a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c"}},
			json:    `{"type":"video","video":{"id":"2938475610293847","mime_type":"video/mp4","sha256":"0d0e0f101112131415161718292a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c"}}`,
			summary: "[video]"},
		{file: "audio", id: "07",
			content: InboundContent{Type: "audio", Audio: &InboundMedia{ID: "3847561029384756", MimeType: "audio/ogg; codecs=opus", SHA256: "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90", Voice: true}},
			json:    `{"type":"audio","audio":{"id":"3847561029384756","mime_type":"audio/ogg; codecs=opus","sha256":"a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90","voice":true}}`,
			summary: "[voice note]"},
		{file: "document", id: "08",
			content: InboundContent{Type: "document", Document: &InboundMedia{ID: "4756102938475610", MimeType: "application/pdf", SHA256: "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100", Caption: "Signed return form", Filename: "return-form.pdf"}},
			json:    `{"type":"document","document":{"id":"4756102938475610","mime_type":"application/pdf","sha256":"ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100","caption":"Signed return form","filename":"return-form.pdf"}}`,
			summary: "[document] Signed return form"},
		{file: "sticker", id: "09",
			content: InboundContent{Type: "sticker", Sticker: &InboundMedia{ID: "5610293847561029", MimeType: "image/webp", SHA256: "1029384756abcdef1029384756abcdef1029384756abcdef1029384756abcdef", Animated: true}},
			json:    `{"type":"sticker","sticker":{"id":"5610293847561029","mime_type":"image/webp","sha256":"1029384756abcdef1029384756abcdef1029384756abcdef1029384756abcdef","animated":true}}`,
			summary: "[sticker]"},
		{file: "location", id: "10",
			content: InboundContent{Type: "location", Location: &InboundLocation{Latitude: -23.561414, Longitude: -46.655881, Name: "Avenida Paulista store", Address: "Av. Paulista, 1578, São Paulo", URL: "https://maps.example/paulista"}},
			json:    `{"type":"location","location":{"latitude":-23.561414,"longitude":-46.655881,"name":"Avenida Paulista store","address":"Av. Paulista, 1578, São Paulo","url":"https://maps.example/paulista"}}`,
			summary: "[location] Avenida Paulista store"},
		{file: "contacts", id: "11",
			content: InboundContent{Type: "contacts", Contacts: json.RawMessage(`[{"name":{"formatted_name":"Bruno Lima","first_name":"Bruno","last_name":"Lima"},"phones":[{"phone":"+55 11 91234-5678","wa_id":"5511912345678","type":"CELL"}],"emails":[{"email":"bruno@example.com","type":"WORK"}]}]`)},
			json:    `{"type":"contacts","contacts":[{"name":{"formatted_name":"Bruno Lima","first_name":"Bruno","last_name":"Lima"},"phones":[{"phone":"+55 11 91234-5678","wa_id":"5511912345678","type":"CELL"}],"emails":[{"email":"bruno@example.com","type":"WORK"}]}]}`,
			summary: "[contacts] Bruno Lima"},
		{file: "reaction", id: "12",
			content: InboundContent{Type: "reaction", Reaction: &InboundReaction{MessageID: business, Emoji: "👍"}},
			json:    `{"type":"reaction","reaction":{"message_id":"` + business + `","emoji":"👍"}}`,
			summary: "[reaction] 👍"},
		{file: "reaction_removed", id: "13",
			content: InboundContent{Type: "reaction", Reaction: &InboundReaction{MessageID: business}},
			json:    `{"type":"reaction","reaction":{"message_id":"` + business + `","emoji":""}}`,
			summary: "[reaction removed]"},
		{file: "unsupported", id: "14",
			content: InboundContent{Type: "unsupported", Unsupported: &InboundUnsupported{Type: "unsupported"}},
			json:    `{"type":"unsupported","unsupported":{"type":"unsupported"}}`,
			summary: "[unsupported: unsupported]"},
		{file: "order", id: "15",
			content: InboundContent{Type: "unsupported", Unsupported: &InboundUnsupported{Type: "order"}},
			json:    `{"type":"unsupported","unsupported":{"type":"order"}}`,
			summary: "[unsupported: order]"},
		{file: "system", id: "16",
			content: InboundContent{Type: "unsupported", Unsupported: &InboundUnsupported{Type: "system"}},
			json:    `{"type":"unsupported","unsupported":{"type":"system"}}`,
			summary: "[unsupported: system]"},
		{file: "interactive_nfm_reply", id: "17",
			content: InboundContent{Type: "unsupported", Unsupported: &InboundUnsupported{Type: "interactive.nfm_reply"}},
			json:    `{"type":"unsupported","unsupported":{"type":"interactive.nfm_reply"}}`,
			summary: "[unsupported: interactive.nfm_reply]"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			body, err := os.ReadFile("testdata/inbound_" + tt.file + ".json")
			if err != nil {
				t.Fatal(err)
			}
			w, err := ParseWebhook(body)
			if err != nil || w.Malformed != 0 || len(w.Messages) != 1 {
				t.Fatalf("%+v %v", w, err)
			}
			m := w.Messages[0]
			want := InboundMessage{
				PhoneNumberID: "106540352242922", ID: wamid + tt.id, From: "+5511987654321",
				Timestamp: time.Unix(1764151200, 0).UTC(), Type: tt.content.Type,
				Text: tt.text, ButtonPayload: tt.payload, ButtonText: tt.buttonText,
				ProfileName: "Ana Souza", ContextID: tt.context, Content: tt.content,
			}
			if !reflect.DeepEqual(m, want) {
				t.Errorf("got  %+v\nwant %+v", m, want)
			}
			got, err := json.Marshal(m.Content)
			if err != nil || string(got) != tt.json {
				t.Errorf("content JSON\n got %s\nwant %s", got, tt.json)
			}
			if s := m.Content.Summary(); s != tt.summary {
				t.Errorf("summary %q, want %q", s, tt.summary)
			}
			// The content reads back as it was written.
			var back InboundContent
			if err := json.Unmarshal(got, &back); err != nil || !reflect.DeepEqual(back, m.Content) {
				t.Errorf("read back %+v %v", back, err)
			}
		})
	}
}

func TestInboundSummary(t *testing.T) {
	long := strings.Repeat("é", 300)
	for _, c := range []struct {
		c    InboundContent
		want string
	}{
		{InboundContent{Type: "text", Text: &InboundText{Body: long}}, strings.Repeat("é", 199) + "…"},
		{InboundContent{Type: "text", Text: &InboundText{Body: strings.Repeat("é", 200)}}, strings.Repeat("é", 200)},
		{InboundContent{Type: "text", Text: &InboundText{Body: "  a\r\n\tb\x00c  "}}, "a b c"},
		{InboundContent{Type: "image", Image: &InboundMedia{ID: "1"}}, "[image]"},
		{InboundContent{Type: "image", Image: &InboundMedia{ID: "1", Caption: " \n "}}, "[image]"},
		{InboundContent{Type: "audio", Audio: &InboundMedia{ID: "1"}}, "[audio]"},
		{InboundContent{Type: "document", Document: &InboundMedia{ID: "1", Filename: "a.pdf"}}, "[document] a.pdf"},
		{InboundContent{Type: "location", Location: &InboundLocation{Latitude: 45.5, Longitude: -9.25}}, "[location] 45.5, -9.25"},
		{InboundContent{Type: "location", Location: &InboundLocation{Address: "Via Roma 1"}}, "[location] Via Roma 1"},
		{InboundContent{Type: "contacts", Contacts: json.RawMessage(`[{"name":{"formatted_name":"A"}},{"name":{"formatted_name":"B"}}]`)}, "[contacts] A, B"},
		{InboundContent{Type: "contacts", Contacts: json.RawMessage(`[{}]`)}, "[contacts]"},
		{InboundContent{Type: "button", Button: &InboundButton{Payload: "P"}}, "P"},
		{InboundContent{Type: "mystery"}, "[mystery]"},
	} {
		got := c.c.Summary()
		if got != c.want {
			t.Errorf("%+v: %q, want %q", c.c, got, c.want)
		}
		if n := len([]rune(got)); n > MaxSummary {
			t.Errorf("%d characters", n)
		}
	}
}
