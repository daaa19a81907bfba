package conversations

import (
	"errors"
	"strings"
	"testing"
)

func TestConversationSessionSummary(t *testing.T) {
	cases := map[string]string{
		`{"type":"text","text":{"body":"Yes, it left."}}`:                                        "Yes, it left.",
		`{"type":"image","image":{"link":"https://x.example/a.png","caption":"Your parcel"}}`:    "[image] Your parcel",
		`{"type":"document","document":{"link":"https://x.example/i.pdf","filename":"inv.pdf"}}`: "[document] inv.pdf",
		`{"type":"video","video":{"link":"https://x.example/v.mp4"}}`:                            "[video]",
		`{"type":"audio","audio":{"link":"https://x.example/a.ogg"}}`:                            "[audio]",
		`{"type":"interactive","interactive":{"type":"button","body":{"text":"Which?"}}}`:        "[buttons] Which?",
		`{"type":"interactive","interactive":{"type":"list","body":{"text":"Pick one"}}}`:        "[list] Pick one",
		`{"type":"reaction","reaction":{"message_id":"wamid.1","emoji":"👍"}}`:                    "[reaction] 👍",
		`{"type":"reaction","reaction":{"message_id":"wamid.1","emoji":""}}`:                     "[reaction removed]",
		`not json`: "[message]",
	}
	for raw, want := range cases {
		if got := SessionSummary([]byte(raw)); got != want {
			t.Errorf("SessionSummary(%s) = %q, want %q", raw, got, want)
		}
	}
}

func TestConversationTextSession(t *testing.T) {
	if s, err := TextSession(strings.Repeat("é", 4096)); err != nil || s.Text.Body == "" || s.Type != "text" {
		t.Fatalf("4,096 characters: %v", err)
	}
	for text, want := range map[string]string{
		"":                        "string_too_short",
		"  \n":                    "value_error",
		strings.Repeat("a", 4097): "string_too_long",
	} {
		_, err := TextSession(text)
		var te *TextError
		if !errors.As(err, &te) || te.Problems[0].Type != want || te.TooLong() != (want == "string_too_long") {
			t.Errorf("TextSession(%.10q): %v, want %s", text, err, want)
		}
	}
}

func TestConversationDisplayName(t *testing.T) {
	for _, c := range [][4]string{
		{"Jane", "Doe", "JD", "Jane Doe"},
		{"", "Doe", "JD", "Doe"},
		{"", "", " JD ", "JD"},
		{"", "", "", ""},
	} {
		if got := DisplayName(c[0], c[1], c[2]); got != c[3] {
			t.Errorf("DisplayName(%q, %q, %q) = %q, want %q", c[0], c[1], c[2], got, c[3])
		}
	}
}
