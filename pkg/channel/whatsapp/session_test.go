package whatsapp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

// valid messages of every session type; each test case changes one.
func validText() whatsapp.Session {
	return whatsapp.Session{Type: "text", Text: &whatsapp.SessionText{Body: "Your order shipped today.", PreviewURL: true}}
}

func validMedia(typ string) whatsapp.Session {
	m := &whatsapp.SessionMedia{Link: "https://cdn.example/files/a.bin"}
	s := whatsapp.Session{Type: typ}
	switch typ {
	case "image":
		m.Caption, s.Image = "receipt", m
	case "video":
		m.Caption, s.Video = "unboxing", m
	case "audio":
		s.Audio = m
	case "document":
		m.Caption, m.Filename, s.Document = "your invoice", "invoice-A-1009.pdf", m
	case "sticker":
		s.Sticker = m
	}
	return s
}

func validButtons() whatsapp.Session {
	return whatsapp.Session{Type: "interactive", Interactive: &whatsapp.SessionInteractive{
		Type:   "button",
		Header: &whatsapp.InteractiveHeader{Type: "text", Text: "Delivery"},
		Body:   whatsapp.InteractiveText{Text: "When should we deliver?"},
		Footer: &whatsapp.InteractiveText{Text: "Reply by tapping"},
		Action: whatsapp.InteractiveAction{Buttons: []whatsapp.InteractiveButton{
			{Type: "reply", Reply: whatsapp.InteractiveReply{ID: "today", Title: "Today"}},
			{Type: "reply", Reply: whatsapp.InteractiveReply{ID: "tomorrow", Title: "Tomorrow"}},
			{Type: "reply", Reply: whatsapp.InteractiveReply{ID: "later", Title: "Later"}},
		}},
	}}
}

func validList() whatsapp.Session {
	return whatsapp.Session{Type: "interactive", Interactive: &whatsapp.SessionInteractive{
		Type:   "list",
		Header: &whatsapp.InteractiveHeader{Type: "text", Text: "Shipping"},
		Body:   whatsapp.InteractiveText{Text: "Which shipping option do you prefer?"},
		Action: whatsapp.InteractiveAction{Button: "Options", Sections: []whatsapp.InteractiveSection{
			{Title: "Fast", Rows: []whatsapp.InteractiveRow{
				{ID: "express", Title: "Express", Description: "Next day"},
				{ID: "priority", Title: "Priority"},
			}},
			{Title: "Cheap", Rows: []whatsapp.InteractiveRow{{ID: "ground", Title: "Ground", Description: "3 to 5 days"}}},
		}},
	}}
}

func validReaction() whatsapp.Session {
	return whatsapp.Session{Type: "reaction", Reaction: &whatsapp.SessionReaction{MessageID: "wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI3", Emoji: "👍"}}
}

func TestValidSessionMessages(t *testing.T) {
	ctx := &whatsapp.SessionContext{MessageID: "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQz"}
	msgs := map[string]whatsapp.Session{
		"text": validText(), "image": validMedia("image"), "video": validMedia("video"), "audio": validMedia("audio"),
		"document": validMedia("document"), "sticker": validMedia("sticker"), "buttons": validButtons(), "list": validList(),
		"reaction": validReaction(),
	}
	for name, m := range msgs {
		if errs := m.Validate(); len(errs) != 0 {
			t.Errorf("%s: %v", name, errs)
		}
		m.Context = ctx
		if errs := m.Validate(); len(errs) != 0 {
			t.Errorf("%s with context: %v", name, errs)
		}
	}
	// The bounds themselves are allowed.
	edge := []whatsapp.Session{
		{Type: "text", Text: &whatsapp.SessionText{Body: strings.Repeat("é", 4096)}},
		{Type: "image", Image: &whatsapp.SessionMedia{Link: "https://cdn.example/" + strings.Repeat("a", 2048-len("https://cdn.example/")), Caption: strings.Repeat("ü", 1024)}},
		{Type: "document", Document: &whatsapp.SessionMedia{Link: "HTTPS://cdn.example/a.pdf", Filename: strings.Repeat("f", 240)}},
		{Type: "reaction", Reaction: &whatsapp.SessionReaction{MessageID: "wamid.x", Emoji: ""}},
		{Type: "text", Text: &whatsapp.SessionText{Body: "ok"}, Context: &whatsapp.SessionContext{MessageID: strings.Repeat("w", 256)}},
	}
	for i, m := range edge {
		if errs := m.Validate(); len(errs) != 0 {
			t.Errorf("edge %d: %v", i, errs)
		}
	}
}

func TestSessionValidate(t *testing.T) {
	type want struct{ loc, typ string }
	long := func(n int) string { return strings.Repeat("x", n) }
	buttons := func(n int) []whatsapp.InteractiveButton {
		var bs []whatsapp.InteractiveButton
		for i := range n {
			bs = append(bs, whatsapp.InteractiveButton{Type: "reply", Reply: whatsapp.InteractiveReply{ID: fmt.Sprint("b", i), Title: fmt.Sprint("B", i)}})
		}
		return bs
	}
	rows := func(prefix string, n int) []whatsapp.InteractiveRow {
		var rs []whatsapp.InteractiveRow
		for i := range n {
			rs = append(rs, whatsapp.InteractiveRow{ID: fmt.Sprint(prefix, i), Title: fmt.Sprint("Row ", i)})
		}
		return rs
	}
	tests := []struct {
		name string
		base func() whatsapp.Session
		edit func(*whatsapp.Session)
		want []want
	}{
		// type and the one object
		{"no type", validText, func(s *whatsapp.Session) { s.Type = "" }, []want{{"type", "missing"}}},
		{"unknown type", validText, func(s *whatsapp.Session) { s.Type = "location" }, []want{{"type", "literal_error"}}},
		{"template is not a session type", validText, func(s *whatsapp.Session) { s.Type = "template" }, []want{{"type", "literal_error"}}},
		{"object of the type missing", validText, func(s *whatsapp.Session) { s.Text = nil }, []want{{"text", "missing"}}},
		{"another object too", validText, func(s *whatsapp.Session) { s.Image = &whatsapp.SessionMedia{Link: "https://a.example/x"} }, []want{{"image", "extra_forbidden"}}},
		{"wrong object only", validText, func(s *whatsapp.Session) { s.Text, s.Reaction = nil, &whatsapp.SessionReaction{MessageID: "w"} },
			[]want{{"text", "missing"}, {"reaction", "extra_forbidden"}}},
		// context
		{"context without id", validText, func(s *whatsapp.Session) { s.Context = &whatsapp.SessionContext{} }, []want{{"context.message_id", "string_too_short"}}},
		{"context id too long", validText, func(s *whatsapp.Session) { s.Context = &whatsapp.SessionContext{MessageID: long(257)} }, []want{{"context.message_id", "string_too_long"}}},
		// text
		{"empty text", validText, func(s *whatsapp.Session) { s.Text.Body = "" }, []want{{"text.body", "string_too_short"}}},
		{"blank text", validText, func(s *whatsapp.Session) { s.Text.Body = " \n\t" }, []want{{"text.body", "value_error"}}},
		{"text over 4096 characters", validText, func(s *whatsapp.Session) { s.Text.Body = strings.Repeat("é", 4097) }, []want{{"text.body", "string_too_long"}}},
		{"text not UTF-8", validText, func(s *whatsapp.Session) { s.Text.Body = "a\xffb" }, []want{{"text.body", "string_unicode"}}},
		// media
		{"no link", func() whatsapp.Session { return validMedia("image") }, func(s *whatsapp.Session) { s.Image.Link = "" }, []want{{"image.link", "url_parsing"}}},
		{"http link", func() whatsapp.Session { return validMedia("image") }, func(s *whatsapp.Session) { s.Image.Link = "http://cdn.example/a.jpg" }, []want{{"image.link", "url_scheme"}}},
		{"ftp link", func() whatsapp.Session { return validMedia("video") }, func(s *whatsapp.Session) { s.Video.Link = "ftp://cdn.example/a.mp4" }, []want{{"video.link", "url_scheme"}}},
		{"relative link", func() whatsapp.Session { return validMedia("image") }, func(s *whatsapp.Session) { s.Image.Link = "/a.jpg" }, []want{{"image.link", "url_parsing"}}},
		{"link without host", func() whatsapp.Session { return validMedia("image") }, func(s *whatsapp.Session) { s.Image.Link = "https:///a.jpg" }, []want{{"image.link", "url_parsing"}}},
		{"link with a space", func() whatsapp.Session { return validMedia("image") }, func(s *whatsapp.Session) { s.Image.Link = "https://cdn.example/a b.jpg" }, []want{{"image.link", "url_parsing"}}},
		{"link not a URL", func() whatsapp.Session { return validMedia("image") }, func(s *whatsapp.Session) { s.Image.Link = "https://[::1" }, []want{{"image.link", "url_parsing"}}},
		{"link too long", func() whatsapp.Session { return validMedia("audio") }, func(s *whatsapp.Session) { s.Audio.Link = "https://cdn.example/" + long(2049) }, []want{{"audio.link", "url_too_long"}}},
		{"caption too long", func() whatsapp.Session { return validMedia("video") }, func(s *whatsapp.Session) { s.Video.Caption = long(1025) }, []want{{"video.caption", "string_too_long"}}},
		{"caption on audio", func() whatsapp.Session { return validMedia("audio") }, func(s *whatsapp.Session) { s.Audio.Caption = "hi" }, []want{{"audio.caption", "extra_forbidden"}}},
		{"caption on sticker", func() whatsapp.Session { return validMedia("sticker") }, func(s *whatsapp.Session) { s.Sticker.Caption = "hi" }, []want{{"sticker.caption", "extra_forbidden"}}},
		{"filename on image", func() whatsapp.Session { return validMedia("image") }, func(s *whatsapp.Session) { s.Image.Filename = "a.jpg" }, []want{{"image.filename", "extra_forbidden"}}},
		{"filename too long", func() whatsapp.Session { return validMedia("document") }, func(s *whatsapp.Session) { s.Document.Filename = long(241) }, []want{{"document.filename", "string_too_long"}}},
		{"several media problems in field order", func() whatsapp.Session { return validMedia("sticker") }, func(s *whatsapp.Session) {
			s.Sticker = &whatsapp.SessionMedia{Link: "http://x.example/s.webp", Caption: "c", Filename: "f"}
		}, []want{{"sticker.link", "url_scheme"}, {"sticker.caption", "extra_forbidden"}, {"sticker.filename", "extra_forbidden"}}},
		// interactive, common parts
		{"interactive without type", validButtons, func(s *whatsapp.Session) { s.Interactive.Type = "" }, []want{{"interactive.type", "missing"}}},
		{"interactive of another type", validButtons, func(s *whatsapp.Session) { s.Interactive.Type = "product" }, []want{{"interactive.type", "literal_error"}}},
		{"empty body", validButtons, func(s *whatsapp.Session) { s.Interactive.Body.Text = "" }, []want{{"interactive.body.text", "string_too_short"}}},
		{"blank body", validList, func(s *whatsapp.Session) { s.Interactive.Body.Text = "   " }, []want{{"interactive.body.text", "value_error"}}},
		{"body too long", validButtons, func(s *whatsapp.Session) { s.Interactive.Body.Text = long(1025) }, []want{{"interactive.body.text", "string_too_long"}}},
		{"header not text", validButtons, func(s *whatsapp.Session) { s.Interactive.Header.Type = "image" }, []want{{"interactive.header.type", "literal_error"}}},
		{"header without type", validButtons, func(s *whatsapp.Session) { s.Interactive.Header.Type = "" }, []want{{"interactive.header.type", "missing"}}},
		{"header empty", validButtons, func(s *whatsapp.Session) { s.Interactive.Header.Text = "" }, []want{{"interactive.header.text", "string_too_short"}}},
		{"header too long", validList, func(s *whatsapp.Session) { s.Interactive.Header.Text = long(61) }, []want{{"interactive.header.text", "string_too_long"}}},
		{"footer empty", validButtons, func(s *whatsapp.Session) { s.Interactive.Footer.Text = "" }, []want{{"interactive.footer.text", "string_too_short"}}},
		{"footer too long", validButtons, func(s *whatsapp.Session) { s.Interactive.Footer.Text = long(61) }, []want{{"interactive.footer.text", "string_too_long"}}},
		// reply buttons
		{"no buttons", validButtons, func(s *whatsapp.Session) { s.Interactive.Action.Buttons = nil }, []want{{"interactive.action.buttons", "missing"}}},
		{"empty buttons", validButtons, func(s *whatsapp.Session) { s.Interactive.Action.Buttons = []whatsapp.InteractiveButton{} }, []want{{"interactive.action.buttons", "too_short"}}},
		{"four buttons", validButtons, func(s *whatsapp.Session) { s.Interactive.Action.Buttons = buttons(4) }, []want{{"interactive.action.buttons", "too_long"}}},
		{"button type", validButtons, func(s *whatsapp.Session) { s.Interactive.Action.Buttons[1].Type = "url" }, []want{{"interactive.action.buttons.1.type", "literal_error"}}},
		{"button title too long", validButtons, func(s *whatsapp.Session) { s.Interactive.Action.Buttons[2].Reply.Title = long(21) },
			[]want{{"interactive.action.buttons.2.reply.title", "string_too_long"}}},
		{"button title empty", validButtons, func(s *whatsapp.Session) { s.Interactive.Action.Buttons[0].Reply.Title = "" },
			[]want{{"interactive.action.buttons.0.reply.title", "string_too_short"}}},
		{"button id empty", validButtons, func(s *whatsapp.Session) { s.Interactive.Action.Buttons[0].Reply.ID = "" },
			[]want{{"interactive.action.buttons.0.reply.id", "string_too_short"}}},
		{"button id too long", validButtons, func(s *whatsapp.Session) { s.Interactive.Action.Buttons[0].Reply.ID = long(257) },
			[]want{{"interactive.action.buttons.0.reply.id", "string_too_long"}}},
		{"duplicate button id and title", validButtons, func(s *whatsapp.Session) {
			s.Interactive.Action.Buttons[2].Reply = s.Interactive.Action.Buttons[0].Reply
		}, []want{{"interactive.action.buttons.2.reply.id", "value_error"}, {"interactive.action.buttons.2.reply.title", "value_error"}}},
		{"list parts on a button message", validButtons, func(s *whatsapp.Session) {
			s.Interactive.Action.Button = "Options"
			s.Interactive.Action.Sections = validList().Interactive.Action.Sections
		}, []want{{"interactive.action.button", "extra_forbidden"}, {"interactive.action.sections", "extra_forbidden"}}},
		// lists
		{"no list button", validList, func(s *whatsapp.Session) { s.Interactive.Action.Button = "" }, []want{{"interactive.action.button", "string_too_short"}}},
		{"list button too long", validList, func(s *whatsapp.Session) { s.Interactive.Action.Button = long(21) }, []want{{"interactive.action.button", "string_too_long"}}},
		{"no sections", validList, func(s *whatsapp.Session) { s.Interactive.Action.Sections = nil }, []want{{"interactive.action.sections", "missing"}}},
		{"empty sections", validList, func(s *whatsapp.Session) { s.Interactive.Action.Sections = []whatsapp.InteractiveSection{} },
			[]want{{"interactive.action.sections", "too_short"}}},
		{"eleven sections", validList, func(s *whatsapp.Session) {
			s.Interactive.Action.Sections = nil
			for i := range 11 {
				s.Interactive.Action.Sections = append(s.Interactive.Action.Sections, whatsapp.InteractiveSection{Title: fmt.Sprint("S", i), Rows: rows(fmt.Sprint("s", i, "r"), 1)})
			}
		}, []want{{"interactive.action.sections", "too_long"}, {"interactive.action.sections", "value_error"}}},
		{"eleven rows in all", validList, func(s *whatsapp.Session) { s.Interactive.Action.Sections[1].Rows = rows("g", 9) },
			[]want{{"interactive.action.sections", "value_error"}}},
		{"eleven rows in one section", validList, func(s *whatsapp.Session) {
			s.Interactive.Action.Sections = []whatsapp.InteractiveSection{{Rows: rows("r", 11)}}
		}, []want{{"interactive.action.sections.0.rows", "too_long"}, {"interactive.action.sections", "value_error"}}},
		{"section without rows", validList, func(s *whatsapp.Session) { s.Interactive.Action.Sections[1].Rows = nil },
			[]want{{"interactive.action.sections.1.rows", "missing"}}},
		{"section with empty rows", validList, func(s *whatsapp.Session) { s.Interactive.Action.Sections[1].Rows = []whatsapp.InteractiveRow{} },
			[]want{{"interactive.action.sections.1.rows", "too_short"}}},
		{"section title required with two sections", validList, func(s *whatsapp.Session) { s.Interactive.Action.Sections[1].Title = "" },
			[]want{{"interactive.action.sections.1.title", "missing"}}},
		{"section title optional with one section", validList, func(s *whatsapp.Session) {
			s.Interactive.Action.Sections = s.Interactive.Action.Sections[:1]
			s.Interactive.Action.Sections[0].Title = ""
		}, nil},
		{"section title too long", validList, func(s *whatsapp.Session) { s.Interactive.Action.Sections[0].Title = long(25) },
			[]want{{"interactive.action.sections.0.title", "string_too_long"}}},
		{"row id empty", validList, func(s *whatsapp.Session) { s.Interactive.Action.Sections[0].Rows[1].ID = "" },
			[]want{{"interactive.action.sections.0.rows.1.id", "string_too_short"}}},
		{"row id too long", validList, func(s *whatsapp.Session) { s.Interactive.Action.Sections[0].Rows[1].ID = long(201) },
			[]want{{"interactive.action.sections.0.rows.1.id", "string_too_long"}}},
		{"row ids unique across sections", validList, func(s *whatsapp.Session) { s.Interactive.Action.Sections[1].Rows[0].ID = "express" },
			[]want{{"interactive.action.sections.1.rows.0.id", "value_error"}}},
		{"row title empty", validList, func(s *whatsapp.Session) { s.Interactive.Action.Sections[0].Rows[0].Title = "" },
			[]want{{"interactive.action.sections.0.rows.0.title", "string_too_short"}}},
		{"row title too long", validList, func(s *whatsapp.Session) { s.Interactive.Action.Sections[0].Rows[0].Title = long(25) },
			[]want{{"interactive.action.sections.0.rows.0.title", "string_too_long"}}},
		{"row description too long", validList, func(s *whatsapp.Session) { s.Interactive.Action.Sections[0].Rows[0].Description = long(73) },
			[]want{{"interactive.action.sections.0.rows.0.description", "string_too_long"}}},
		{"buttons on a list", validList, func(s *whatsapp.Session) { s.Interactive.Action.Buttons = buttons(1) },
			[]want{{"interactive.action.buttons", "extra_forbidden"}}},
		// reactions
		{"reaction without message id", validReaction, func(s *whatsapp.Session) { s.Reaction.MessageID = "" }, []want{{"reaction.message_id", "string_too_short"}}},
		{"reaction with text", validReaction, func(s *whatsapp.Session) { s.Reaction.Emoji = "ok" }, []want{{"reaction.emoji", "value_error"}}},
		{"reaction with two emoji", validReaction, func(s *whatsapp.Session) { s.Reaction.Emoji = "👍👍" }, []want{{"reaction.emoji", "value_error"}}},
		// order: type, context, then the objects
		{"errors in a stable order", validButtons, func(s *whatsapp.Session) {
			s.Context = &whatsapp.SessionContext{}
			s.Text = &whatsapp.SessionText{Body: "x"}
			s.Interactive.Header.Text = ""
			s.Interactive.Action.Buttons[0].Reply.Title = long(30)
			s.Reaction = &whatsapp.SessionReaction{}
		}, []want{
			{"context.message_id", "string_too_short"}, {"text", "extra_forbidden"}, {"interactive.header.text", "string_too_short"},
			{"interactive.action.buttons.0.reply.title", "string_too_long"}, {"reaction", "extra_forbidden"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.base()
			tt.edit(&s)
			errs := s.Validate()
			var got []want
			for _, e := range errs {
				got = append(got, want{strings.Join(e.Loc, "."), e.Type})
				if e.Msg == "" {
					t.Errorf("%v has no message", e)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("got  %v\nwant %v\n(%v)", got, tt.want, errs)
			}
			// Stable: the same message gives the same errors.
			if again := s.Validate(); fmt.Sprint(again) != fmt.Sprint(errs) {
				t.Errorf("second run %v", again)
			}
		})
	}
}

func TestSessionValidateMessages(t *testing.T) {
	s := validText()
	s.Text.Body = strings.Repeat("x", 4097)
	errs := s.Validate()
	if len(errs) != 1 || errs[0].Msg != "String should have at most 4096 characters" || errs[0].String() != "text.body: String should have at most 4096 characters" {
		t.Errorf("%v", errs)
	}
	for _, c := range []struct {
		s    whatsapp.Session
		msg  string
		want string
	}{
		{whatsapp.Session{Type: "poll"}, "type", "Input should be 'text', 'image', 'video', 'audio', 'document', 'sticker', 'interactive' or 'reaction'"},
		{whatsapp.Session{Type: "text"}, "text", "Field required"},
		{whatsapp.Session{Type: "text", Text: &whatsapp.SessionText{}}, "text.body", "String should have at least 1 character"},
		{whatsapp.Session{Type: "image", Image: &whatsapp.SessionMedia{Link: "http://a.example/x.png"}}, "image.link", "URL scheme should be 'https'"},
		{whatsapp.Session{Type: "audio", Audio: &whatsapp.SessionMedia{Link: "https://a.example/x.ogg", Caption: "x"}}, "audio.caption", "Extra inputs are not permitted"},
	} {
		errs := c.s.Validate()
		if len(errs) == 0 || strings.Join(errs[0].Loc, ".") != c.msg || errs[0].Msg != c.want {
			t.Errorf("%+v: %v, want %s: %s", c.s, errs, c.msg, c.want)
		}
	}
	b := validButtons()
	b.Interactive.Action.Buttons = append(b.Interactive.Action.Buttons, b.Interactive.Action.Buttons[0])
	b.Interactive.Action.Buttons[3].Reply = whatsapp.InteractiveReply{ID: "x", Title: "X"}
	if errs := b.Validate(); len(errs) != 1 || errs[0].Msg != "List should have at most 3 items after validation, not 4" {
		t.Errorf("four buttons: %v", errs)
	}
}

func TestIsSingleEmoji(t *testing.T) {
	for _, s := range []string{
		"👍", "👍🏽", "❤️", "❤", "🇮🇹", "1️⃣", "#⃣", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🧑🏿‍🤝‍🧑🏻", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "😀", "🫠", "©️", "⭐", "👁️‍🗨️",
	} {
		if !whatsapp.IsSingleEmoji(s) {
			t.Errorf("%q (%U) refused", s, []rune(s))
		}
	}
	for _, s := range []string{
		"", "a", "ok", "👍👍", "👍 ", " 👍", "ok👍", "🇮", "🇮🇹🇮", "1", "🏻", "👍\u200d", "\u200d👍", "🏴󠁧󠁢", "1️⃣1️⃣", "😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀",
	} {
		if whatsapp.IsSingleEmoji(s) {
			t.Errorf("%q accepted", s)
		}
	}
}

func TestSessionWireFormat(t *testing.T) {
	api := newCloudAPI(t, acct.AccessToken)
	cl := newClient(t, api.URL, 5*time.Second)
	msg := validButtons()
	msg.Context = &whatsapp.SessionContext{MessageID: "wamid.IN1"}
	id, err := cl.SendSession(context.Background(), acct, "+14155550123", msg)
	if err != nil || !strings.HasPrefix(id, "wamid.") {
		t.Fatalf("SendSession: %q %v", id, err)
	}
	want := `{"messaging_product":"whatsapp","recipient_type":"individual","to":"14155550123","type":"interactive",` +
		`"context":{"message_id":"wamid.IN1"},"interactive":{"type":"button","header":{"type":"text","text":"Delivery"},` +
		`"body":{"text":"When should we deliver?"},"footer":{"text":"Reply by tapping"},"action":{"buttons":[` +
		`{"type":"reply","reply":{"id":"today","title":"Today"}},{"type":"reply","reply":{"id":"tomorrow","title":"Tomorrow"}},` +
		`{"type":"reply","reply":{"id":"later","title":"Later"}}]}}}`
	if got := string(api.lastBody()); got != want {
		t.Errorf("body\n got %s\nwant %s", got, want)
	}
	for name, c := range map[string]struct {
		s    whatsapp.Session
		want string
	}{
		"text":     {validText(), `"type":"text","text":{"body":"Your order shipped today.","preview_url":true}}`},
		"document": {validMedia("document"), `"type":"document","document":{"link":"https://cdn.example/files/a.bin","caption":"your invoice","filename":"invoice-A-1009.pdf"}}`},
		"sticker":  {validMedia("sticker"), `"type":"sticker","sticker":{"link":"https://cdn.example/files/a.bin"}}`},
		"reaction": {validReaction(), `"type":"reaction","reaction":{"message_id":"wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI3","emoji":"👍"}}`},
		"unreact":  {whatsapp.Session{Type: "reaction", Reaction: &whatsapp.SessionReaction{MessageID: "wamid.x"}}, `"type":"reaction","reaction":{"message_id":"wamid.x","emoji":""}}`},
		"list":     {validList(), `"action":{"button":"Options","sections":[{"title":"Fast","rows":[{"id":"express","title":"Express","description":"Next day"},{"id":"priority","title":"Priority"}]},{"title":"Cheap","rows":[{"id":"ground","title":"Ground","description":"3 to 5 days"}]}]}}}`},
	} {
		if _, err := cl.SendSession(context.Background(), acct, "14155550123", c.s); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := string(api.lastBody()); !strings.HasPrefix(got, `{"messaging_product":"whatsapp","recipient_type":"individual","to":"14155550123",`) || !strings.HasSuffix(got, c.want) {
			t.Errorf("%s: %s", name, got)
		}
	}
	// What the client sends, the wire type reads back whole.
	if _, err := cl.SendSession(context.Background(), acct, "14155550123", validList()); err != nil {
		t.Fatal(err)
	}
	var back whatsapp.SessionMessage
	if err := json.Unmarshal(api.lastBody(), &back); err != nil || back.Interactive == nil || len(back.Interactive.Action.Sections) != 2 {
		t.Errorf("read back: %+v %v", back, err)
	}
}

func TestSendSessionRefusesBeforeSending(t *testing.T) {
	api := newCloudAPI(t, acct.AccessToken)
	cl := newClient(t, api.URL, 5*time.Second)
	bad := validText()
	bad.Text.Body = ""
	bad.Image = &whatsapp.SessionMedia{Link: "x"}
	for name, c := range map[string]struct {
		to   string
		msg  whatsapp.Session
		code int
		part string
	}{
		"bad number":  {"12", validText(), whatsapp.CodeInvalidRecipient, "recipient"},
		"bad message": {"+14155550123", bad, whatsapp.CodeInvalidSession, "text.body"},
	} {
		id, err := cl.SendSession(context.Background(), acct, c.to, c.msg)
		var re *whatsapp.RenderError
		if id != "" || !errors.As(err, &re) || re.ErrorCode() != c.code || re.Part != c.part || whatsapp.Classify(err) != whatsapp.Permanent || !errors.Is(err, whatsapp.ErrInvalidMessage) {
			t.Errorf("%s: %q %v", name, id, err)
		}
		if name == "bad message" && !strings.Contains(re.Title(), "Session message invalid: text.body: String should have at least 1 character (and 1 more problem)") {
			t.Errorf("title %q", re.Title())
		}
	}
	if api.lastBody() != nil {
		t.Errorf("a refused message was sent: %s", api.lastBody())
	}
	_, err := cl.SendSession(context.Background(), whatsapp.Account{PhoneNumberID: "1"}, "+14155550123", validText())
	var pe *whatsapp.Error
	if !errors.As(err, &pe) || pe.Class != whatsapp.RetryLater {
		t.Errorf("no token: %v", err)
	}
}
