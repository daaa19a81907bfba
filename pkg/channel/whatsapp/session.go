package whatsapp

import (
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/parleyhq/parley/pkg/phone"
)

// Session messages are the Cloud API's free-form (non-template) messages,
// which Meta delivers only inside the 24-hour customer service window. The
// types below are their wire format; the client marshals them, provider-sim
// unmarshals them, and Validate holds them to the documented limits.
//
// The documents the limits come from (Meta, developers.facebook.com):
//   - [text]: "Text messages" (docs/whatsapp/cloud-api/messages/text-messages)
//     and the Messages reference's text object;
//   - [media]: "Image / Video / Audio / Document / Sticker messages" and the
//     Messages reference's media object;
//   - [buttons]: "Interactive reply buttons messages";
//   - [list]: "Interactive list messages";
//   - [interactive]: the Messages reference's interactive object (header,
//     body, footer, action);
//   - [reaction]: "Reaction messages";
//   - [context]: "Contextual replies" (the context object).
//
// Where a document states no bound, the bound is Parley's own and says so.

// Session is one session message: Type names the one object that is set.
type Session struct {
	// Type is text, image, video, audio, document, sticker, interactive or
	// reaction.
	Type        string              `json:"type"`
	Context     *SessionContext     `json:"context,omitempty"`
	Text        *SessionText        `json:"text,omitempty"`
	Image       *SessionMedia       `json:"image,omitempty"`
	Video       *SessionMedia       `json:"video,omitempty"`
	Audio       *SessionMedia       `json:"audio,omitempty"`
	Document    *SessionMedia       `json:"document,omitempty"`
	Sticker     *SessionMedia       `json:"sticker,omitempty"`
	Interactive *SessionInteractive `json:"interactive,omitempty"`
	Reaction    *SessionReaction    `json:"reaction,omitempty"`
}

// SessionContext makes the message a reply to an earlier one (its wamid).
type SessionContext struct {
	MessageID string `json:"message_id"`
}

// SessionText is a text message's body.
type SessionText struct {
	Body string `json:"body"`
	// PreviewURL asks the WhatsApp client to render a preview of the first
	// URL in the body.
	PreviewURL bool `json:"preview_url,omitempty"`
}

// SessionMedia is media Meta downloads from a public https URL.
type SessionMedia struct {
	Link string `json:"link"`
	// Caption is for image, video and document only.
	Caption string `json:"caption,omitempty"`
	// Filename is for document only: the name the recipient sees.
	Filename string `json:"filename,omitempty"`
}

// SessionInteractive is a reply buttons (Type button) or list (Type list)
// message.
type SessionInteractive struct {
	// Type is button or list.
	Type   string             `json:"type"`
	Header *InteractiveHeader `json:"header,omitempty"`
	Body   InteractiveText    `json:"body"`
	Footer *InteractiveText   `json:"footer,omitempty"`
	Action InteractiveAction  `json:"action"`
}

// InteractiveHeader is an interactive message's header; Parley sends text
// headers only.
type InteractiveHeader struct {
	// Type is text.
	Type string `json:"type"`
	Text string `json:"text"`
}

// InteractiveText is the body or the footer of an interactive message.
type InteractiveText struct {
	Text string `json:"text"`
}

// InteractiveAction is the buttons of a button message, or the button
// label and the sections of a list message.
type InteractiveAction struct {
	Buttons  []InteractiveButton  `json:"buttons,omitempty"`
	Button   string               `json:"button,omitempty"`
	Sections []InteractiveSection `json:"sections,omitempty"`
}

// InteractiveButton is one reply button.
type InteractiveButton struct {
	// Type is reply.
	Type  string           `json:"type"`
	Reply InteractiveReply `json:"reply"`
}

// InteractiveReply is a reply button's id (sent back when tapped) and
// label.
type InteractiveReply struct {
	ID    string `json:"id"`
	Title string `json:"title"`
}

// InteractiveSection is one section of a list message.
type InteractiveSection struct {
	Title string           `json:"title,omitempty"`
	Rows  []InteractiveRow `json:"rows"`
}

// InteractiveRow is one option of a list message.
type InteractiveRow struct {
	ID          string `json:"id"`
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
}

// SessionReaction puts an emoji on a message (an empty Emoji removes the
// reaction).
type SessionReaction struct {
	MessageID string `json:"message_id"`
	Emoji     string `json:"emoji"`
}

// Message types of the Cloud API, sent and received.
const (
	MessageTypeText        = "text"
	MessageTypeImage       = "image"
	MessageTypeVideo       = "video"
	MessageTypeAudio       = "audio"
	MessageTypeDocument    = "document"
	MessageTypeSticker     = "sticker"
	MessageTypeInteractive = "interactive"
	MessageTypeReaction    = "reaction"
	// Only received:
	MessageTypeButton      = "button"
	MessageTypeLocation    = "location"
	MessageTypeContacts    = "contacts"
	MessageTypeUnsupported = "unsupported"
)

// Interactive message types and the reply button type.
const (
	InteractiveButtons = "button"
	InteractiveList    = "list"
	ButtonTypeReply    = "reply"
	HeaderTypeText     = "text"
)

// The limits Validate enforces, in characters (runes) unless said otherwise.
const (
	MaxTextBody = 4096 // [text]
	// MaxMediaLink is Parley's bound: the documents state none, and 2048 is
	// what browsers and CDNs reliably carry.
	MaxMediaLink       = 2048
	MaxCaption         = 1024 // [media]: image, video and document captions
	MaxFilename        = 240  // [media]: document filename
	MaxInteractiveBody = 1024 // [interactive]: body.text (the list guide now says 4096; the reference 1024)
	MaxHeaderText      = 60   // [interactive]: header.text
	MaxFooterText      = 60   // [interactive]: footer.text
	MaxReplyButtons    = 3    // [buttons]
	MaxButtonTitle     = 20   // [buttons]: reply.title
	MaxButtonID        = 256  // [buttons]: reply.id
	MaxListButton      = 20   // [list]: action.button
	MaxSections        = 10   // [list]
	MaxListRows        = 10   // [list]: rows of all sections together
	MaxSectionTitle    = 24   // [list]: required when there is more than one section
	MaxRowID           = 200  // [list]
	MaxRowTitle        = 24   // [list]
	MaxRowDescription  = 72   // [list]
	MaxMessageIDRef    = 256  // Parley's bound on context.message_id and reaction.message_id: wamids are under 100 characters
)

// maxEmojiSequenceLen bounds an emoji in runes: the longest RGI sequences
// (tag flags, families with skin tones) have 7 to 15.
const maxEmojiSequenceLen = 16

// SessionTypes are the session message types, in the order Validate
// names them.
var SessionTypes = []string{
	MessageTypeText, MessageTypeImage, MessageTypeVideo, MessageTypeAudio,
	MessageTypeDocument, MessageTypeSticker, MessageTypeInteractive, MessageTypeReaction,
}

// FieldError is one thing wrong with a session message. Loc is the path
// below the message (e.g. ["text","body"], ["interactive","action",
// "buttons","3"]; list indexes are decimal strings), Type a pydantic-style
// error type ("missing", "string_too_short", "string_too_long", "too_short",
// "too_long", "value_error", "url_parsing", "url_scheme", "url_too_long",
// "literal_error", "extra_forbidden", "string_unicode"), Msg a
// pydantic-style message ("String should have at most 4096 characters").
type FieldError struct {
	Loc  []string
	Type string
	Msg  string
}

// String is "text.body: String should have at most 4096 characters".
func (e FieldError) String() string { return strings.Join(e.Loc, ".") + ": " + e.Msg }

// Validate reports everything wrong with the message under the Cloud API's
// documented limits, in a stable order: type, context, then the message
// objects in the order of Session's fields, each field by field. An empty
// result means the message is valid.
func (s Session) Validate() []FieldError {
	var v validator
	known := false
	switch {
	case s.Type == "":
		v.add(loc("type"), "missing", "Field required")
	case !contains(SessionTypes, s.Type):
		v.add(loc("type"), "literal_error", LiteralMsg(SessionTypes))
	default:
		known = true
	}
	if s.Context != nil {
		v.str(loc("context", "message_id"), s.Context.MessageID, 1, MaxMessageIDRef)
	}
	// Exactly the object of the type, and no other.
	object := func(name string, set bool, check func(base []string)) {
		switch {
		case known && name == s.Type && !set:
			v.add(loc(name), "missing", "Field required")
		case known && name == s.Type:
			check(loc(name))
		case set && known:
			v.add(loc(name), "extra_forbidden", "Extra inputs are not permitted")
		}
	}
	object(MessageTypeText, s.Text != nil, func(base []string) { v.text(base, s.Text) })
	object(MessageTypeImage, s.Image != nil, func(base []string) { v.media(base, s.Image, true, false) })
	object(MessageTypeVideo, s.Video != nil, func(base []string) { v.media(base, s.Video, true, false) })
	object(MessageTypeAudio, s.Audio != nil, func(base []string) { v.media(base, s.Audio, false, false) })
	object(MessageTypeDocument, s.Document != nil, func(base []string) { v.media(base, s.Document, true, true) })
	object(MessageTypeSticker, s.Sticker != nil, func(base []string) { v.media(base, s.Sticker, false, false) })
	object(MessageTypeInteractive, s.Interactive != nil, func(base []string) { v.interactive(base, s.Interactive) })
	object(MessageTypeReaction, s.Reaction != nil, func(base []string) { v.reaction(base, s.Reaction) })
	return v.errs
}

type validator struct{ errs []FieldError }

func (v *validator) add(l []string, typ, msg string) {
	v.errs = append(v.errs, FieldError{Loc: l, Type: typ, Msg: msg})
}

// loc builds a path; at extends one without sharing its backing array.
func loc(parts ...string) []string { return parts }

func at(base []string, more ...string) []string {
	out := make([]string, 0, len(base)+len(more))
	return append(append(out, base...), more...)
}

// str checks a string's length in characters; min 1 makes it required.
func (v *validator) str(l []string, s string, minLen, maxLen int) bool {
	if !utf8.ValidString(s) {
		v.add(l, "string_unicode", "Input should be a valid string, unable to parse raw data as a unicode string")
		return false
	}
	n := utf8.RuneCountInString(s)
	switch {
	case n < minLen:
		v.add(l, "string_too_short", "String should have at least "+plural(minLen, "character"))
		return false
	case n > maxLen:
		v.add(l, "string_too_long", "String should have at most "+plural(maxLen, "character"))
		return false
	}
	return true
}

// prose is a required text shown as the message: it must not be blank.
func (v *validator) prose(l []string, s string, maxLen int) {
	if v.str(l, s, 1, maxLen) && strings.TrimSpace(s) == "" {
		v.add(l, "value_error", "Value error, must not be blank")
	}
}

// list checks a list's presence and length.
func (v *validator) list(l []string, n int, isNil bool, minLen, maxLen int) {
	switch {
	case isNil:
		v.add(l, "missing", "Field required")
	case n < minLen:
		v.add(l, "too_short", "List should have at least "+plural(minLen, "item")+" after validation, not "+strconv.Itoa(n))
	case n > maxLen:
		v.add(l, "too_long", "List should have at most "+plural(maxLen, "item")+" after validation, not "+strconv.Itoa(n))
	}
}

func (v *validator) literal(l []string, s string, allowed ...string) bool {
	switch {
	case s == "":
		v.add(l, "missing", "Field required")
	case !contains(allowed, s):
		v.add(l, "literal_error", LiteralMsg(allowed))
	default:
		return true
	}
	return false
}

func (v *validator) extra(l []string, set bool) {
	if set {
		v.add(l, "extra_forbidden", "Extra inputs are not permitted")
	}
}

func (v *validator) text(base []string, t *SessionText) {
	v.prose(at(base, "body"), t.Body, MaxTextBody)
}

// media: [media] takes a caption on image, video and document, a filename
// on document only; audio and sticker take neither.
func (v *validator) media(base []string, m *SessionMedia, caption, filename bool) {
	v.link(at(base, "link"), m.Link)
	if caption {
		v.str(at(base, "caption"), m.Caption, 0, MaxCaption)
	} else {
		v.extra(at(base, "caption"), m.Caption != "")
	}
	if filename {
		v.str(at(base, "filename"), m.Filename, 0, MaxFilename)
	} else {
		v.extra(at(base, "filename"), m.Filename != "")
	}
}

// link is an absolute https URL with a host: Meta fetches it from the
// public internet, and Parley sends no media over plain http.
func (v *validator) link(l []string, s string) {
	if s == "" {
		v.add(l, "url_parsing", "Input should be a valid URL, input is empty")
		return
	}
	if utf8.RuneCountInString(s) > MaxMediaLink {
		v.add(l, "url_too_long", "URL should have at most "+plural(MaxMediaLink, "character"))
		return
	}
	if strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		v.add(l, "url_parsing", "Input should be a valid URL, invalid character")
		return
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		v.add(l, "url_parsing", "Input should be a valid URL, invalid syntax")
	case u.Scheme == "":
		v.add(l, "url_parsing", "Input should be a valid URL, relative URL without a base")
	case !strings.EqualFold(u.Scheme, "https"):
		v.add(l, "url_scheme", "URL scheme should be 'https'")
	case u.Hostname() == "":
		v.add(l, "url_parsing", "Input should be a valid URL, empty host")
	}
}

func (v *validator) interactive(base []string, in *SessionInteractive) {
	kind := at(base, "type")
	known := v.literal(kind, in.Type, InteractiveButtons, InteractiveList)
	if h := in.Header; h != nil {
		v.literal(at(base, "header", "type"), h.Type, HeaderTypeText)
		v.str(at(base, "header", "text"), h.Text, 1, MaxHeaderText)
	}
	v.prose(at(base, "body", "text"), in.Body.Text, MaxInteractiveBody)
	if in.Footer != nil {
		v.str(at(base, "footer", "text"), in.Footer.Text, 1, MaxFooterText)
	}
	if !known {
		return
	}
	action := at(base, "action")
	a := in.Action
	if in.Type == InteractiveButtons {
		v.buttons(action, a)
		return
	}
	v.sections(action, a)
}

// buttons: [buttons] 1 to 3 reply buttons; titles unique within the
// message, ids unique (they tell the taps apart).
func (v *validator) buttons(action []string, a InteractiveAction) {
	l := at(action, "buttons")
	v.list(l, len(a.Buttons), a.Buttons == nil, 1, MaxReplyButtons)
	ids, titles := map[string]bool{}, map[string]bool{}
	for i, b := range a.Buttons {
		bl := at(l, strconv.Itoa(i))
		v.literal(at(bl, "type"), b.Type, ButtonTypeReply)
		if v.str(at(bl, "reply", "id"), b.Reply.ID, 1, MaxButtonID) {
			if ids[b.Reply.ID] {
				v.add(at(bl, "reply", "id"), "value_error", "Value error, button ids must be unique")
			}
			ids[b.Reply.ID] = true
		}
		if v.str(at(bl, "reply", "title"), b.Reply.Title, 1, MaxButtonTitle) {
			if titles[b.Reply.Title] {
				v.add(at(bl, "reply", "title"), "value_error", "Value error, button titles must be unique")
			}
			titles[b.Reply.Title] = true
		}
	}
	v.extra(at(action, "button"), a.Button != "")
	v.extra(at(action, "sections"), a.Sections != nil)
}

// sections: [list] a button label, 1 to 10 sections of at least one row,
// at most 10 rows in all, row ids unique in the message, section titles
// required when there is more than one section.
func (v *validator) sections(action []string, a InteractiveAction) {
	v.extra(at(action, "buttons"), a.Buttons != nil)
	v.str(at(action, "button"), a.Button, 1, MaxListButton)
	l := at(action, "sections")
	v.list(l, len(a.Sections), a.Sections == nil, 1, MaxSections)
	rows := 0
	ids := map[string]bool{}
	for i, sec := range a.Sections {
		sl := at(l, strconv.Itoa(i))
		if len(a.Sections) > 1 && sec.Title == "" {
			v.add(at(sl, "title"), "missing", "Field required when the list has more than one section")
		} else {
			v.str(at(sl, "title"), sec.Title, 0, MaxSectionTitle)
		}
		rl := at(sl, "rows")
		v.list(rl, len(sec.Rows), sec.Rows == nil, 1, MaxListRows)
		rows += len(sec.Rows)
		for j, r := range sec.Rows {
			l := at(rl, strconv.Itoa(j))
			if v.str(at(l, "id"), r.ID, 1, MaxRowID) {
				if ids[r.ID] {
					v.add(at(l, "id"), "value_error", "Value error, row ids must be unique")
				}
				ids[r.ID] = true
			}
			v.str(at(l, "title"), r.Title, 1, MaxRowTitle)
			v.str(at(l, "description"), r.Description, 0, MaxRowDescription)
		}
	}
	if rows > MaxListRows {
		v.add(l, "value_error", "Value error, a list has at most "+strconv.Itoa(MaxListRows)+" rows in all, not "+strconv.Itoa(rows))
	}
}

// reaction: [reaction] the message reacted to, and one emoji ("" removes
// the reaction).
func (v *validator) reaction(base []string, r *SessionReaction) {
	v.str(at(base, "message_id"), r.MessageID, 1, MaxMessageIDRef)
	if r.Emoji != "" && !IsSingleEmoji(r.Emoji) {
		v.add(at(base, "emoji"), "value_error", "Value error, must be one emoji, or empty to remove the reaction")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// LiteralMsg is pydantic's "Input should be 'a', 'b' or 'c'".
func LiteralMsg(allowed []string) string {
	q := make([]string, len(allowed))
	for i, a := range allowed {
		q[i] = "'" + a + "'"
	}
	if len(q) == 1 {
		return "Input should be " + q[0]
	}
	return "Input should be " + strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// IsSingleEmoji reports whether s is exactly one emoji: a pictographic
// character with an optional variation selector, skin tone modifier and
// tag sequence, several of them joined by zero width joiners (👨‍👩‍👧),
// a flag (two regional indicators), or a keycap (1️⃣). Pictographic is an
// approximation of Unicode's Extended_Pictographic property by its blocks,
// good enough to refuse text, several emoji, or an emoji with text around.
func IsSingleEmoji(s string) bool {
	rs := []rune(s)
	n := len(rs)
	if n == 0 || n > maxEmojiSequenceLen {
		return false
	}
	if isRegionalIndicator(rs[0]) {
		return n == 2 && isRegionalIndicator(rs[1])
	}
	if r := rs[0]; r == '#' || r == '*' || r >= '0' && r <= '9' {
		i := 1
		if i < n && rs[i] == 0xFE0F {
			i++
		}
		return i == n-1 && rs[i] == 0x20E3
	}
	for i := 0; ; {
		if i >= n || !isPictographic(rs[i]) {
			return false
		}
		i++
		if i < n && rs[i] == 0xFE0F {
			i++
		}
		if i < n && isSkinTone(rs[i]) {
			i++
		}
		if i < n && rs[i] >= 0xE0020 && rs[i] <= 0xE007E {
			for i < n && rs[i] >= 0xE0020 && rs[i] <= 0xE007E {
				i++
			}
			if i >= n || rs[i] != 0xE007F {
				return false
			}
			i++
		}
		if i == n {
			return true
		}
		if rs[i] != 0x200D {
			return false
		}
		i++
	}
}

func isRegionalIndicator(r rune) bool { return r >= 0x1F1E6 && r <= 0x1F1FF }

func isSkinTone(r rune) bool { return r >= 0x1F3FB && r <= 0x1F3FF }

// pictographic are the blocks and characters of Extended_Pictographic.
var pictographic = [][2]rune{
	{0x00A9, 0x00A9}, {0x00AE, 0x00AE}, {0x203C, 0x203C}, {0x2049, 0x2049},
	{0x2122, 0x2122}, {0x2139, 0x2139}, {0x2194, 0x2199}, {0x21A9, 0x21AA},
	{0x231A, 0x231B}, {0x2328, 0x2328}, {0x2388, 0x2388}, {0x23CF, 0x23CF},
	{0x23E9, 0x23F3}, {0x23F8, 0x23FA}, {0x24C2, 0x24C2}, {0x25AA, 0x25AB},
	{0x25B6, 0x25B6}, {0x25C0, 0x25C0}, {0x25FB, 0x25FE}, {0x2600, 0x27BF},
	{0x2934, 0x2935}, {0x2B05, 0x2B07}, {0x2B1B, 0x2B1C}, {0x2B50, 0x2B50},
	{0x2B55, 0x2B55}, {0x3030, 0x3030}, {0x303D, 0x303D}, {0x3297, 0x3297},
	{0x3299, 0x3299}, {0x1F000, 0x1FAFF}, {0x1FC00, 0x1FFFD},
}

func isPictographic(r rune) bool {
	if isRegionalIndicator(r) || isSkinTone(r) {
		return false
	}
	for _, b := range pictographic {
		if r >= b[0] && r <= b[1] {
			return true
		}
	}
	return false
}

// SessionMessage is the body of POST /{version}/{phone_number_id}/messages
// for a session message: the envelope and the message's own fields.
type SessionMessage struct {
	MessagingProduct string `json:"messaging_product"`
	RecipientType    string `json:"recipient_type"`
	// To is the recipient's number in digits, without '+'.
	To string `json:"to"`
	Session
}

// CodeInvalidSession is Parley's error code for a session message that
// breaks the Cloud API's limits (found before any call to the provider).
const CodeInvalidSession = 900005

// BuildSessionMessage checks the recipient (E.164) and the message
// (Validate) and returns the body to post. A bad recipient is a
// *RenderError with CodeInvalidRecipient, an invalid message one with
// CodeInvalidSession naming the first problem: both are Permanent.
func BuildSessionMessage(to string, msg Session) (SessionMessage, error) {
	number, ok := phone.Normalize(to)
	if !ok {
		return SessionMessage{}, &RenderError{Code: CodeInvalidRecipient, Part: "recipient", Reason: "phone is not an E.164 number"}
	}
	if errs := msg.Validate(); len(errs) > 0 {
		reason := errs[0].Msg
		if len(errs) > 1 {
			reason += " (and " + plural(len(errs)-1, "more problem") + ")"
		}
		return SessionMessage{}, &RenderError{Code: CodeInvalidSession, Part: strings.Join(errs[0].Loc, "."), Reason: reason}
	}
	return SessionMessage{
		MessagingProduct: MessagingProduct,
		RecipientType:    RecipientIndividual,
		To:               number[1:],
		Session:          msg,
	}, nil
}
