package whatsapp

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// InboundContent is an inbound message as Parley stores it and forwards it
// in message.received events: {"type": T, T: {...}}, with only the fields
// Meta documents for that type (its "Messages webhook reference"), so that
// what Meta adds later is not passed on unread. Exactly the object of Type
// is set.
type InboundContent struct {
	Type string `json:"type"`
	// Text: {body}.
	Text *InboundText `json:"text,omitempty"`
	// Button is a tap on a template's quick-reply button: {payload, text}.
	Button *InboundButton `json:"button,omitempty"`
	// Interactive is the answer to an interactive message:
	// {type: button_reply|list_reply, id, title, description?}.
	Interactive *InboundInteractive `json:"interactive,omitempty"`
	// Media: {id, mime_type, sha256, caption?, filename?, animated?, voice?}.
	Image    *InboundMedia `json:"image,omitempty"`
	Video    *InboundMedia `json:"video,omitempty"`
	Audio    *InboundMedia `json:"audio,omitempty"`
	Document *InboundMedia `json:"document,omitempty"`
	Sticker  *InboundMedia `json:"sticker,omitempty"`
	// Location: {latitude, longitude, name?, address?, url?}.
	Location *InboundLocation `json:"location,omitempty"`
	// Contacts is the array of contact cards as Meta sent it (compacted).
	Contacts json.RawMessage `json:"contacts,omitempty"`
	// Reaction: {message_id, emoji}; an empty emoji is a removed reaction.
	Reaction *InboundReaction `json:"reaction,omitempty"`
	// Unsupported is any other type (order, system, Meta's own
	// unsupported, a type Meta adds later): {type: the raw type}.
	Unsupported *InboundUnsupported `json:"unsupported,omitempty"`
}

// InboundText is a text message's body.
type InboundText struct {
	Body string `json:"body"`
}

// InboundButton is a tap on a template's quick-reply button.
type InboundButton struct {
	Payload string `json:"payload"`
	Text    string `json:"text"`
}

// Interactive reply types.
const (
	InteractiveButtonReply = "button_reply"
	InteractiveListReply   = "list_reply"
)

// InboundInteractive is the reply button or list row the user chose.
type InboundInteractive struct {
	// Type is button_reply or list_reply.
	Type        string `json:"type"`
	ID          string `json:"id"`
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
}

// InboundMedia is received media. ID is Meta's media id: the media itself
// is downloaded through the Graph API (GET /{media_id}) with the account's
// token, within 30 days.
type InboundMedia struct {
	ID       string `json:"id"`
	MimeType string `json:"mime_type"`
	SHA256   string `json:"sha256"`
	// Caption is for image, video and document.
	Caption string `json:"caption,omitempty"`
	// Filename is for document.
	Filename string `json:"filename,omitempty"`
	// Animated is for sticker.
	Animated bool `json:"animated,omitempty"`
	// Voice is for audio: a voice note rather than an audio file.
	Voice bool `json:"voice,omitempty"`
}

// InboundLocation is a shared location.
type InboundLocation struct {
	Latitude  float64 `json:"latitude"`
	Longitude float64 `json:"longitude"`
	Name      string  `json:"name,omitempty"`
	Address   string  `json:"address,omitempty"`
	URL       string  `json:"url,omitempty"`
}

// InboundReaction is a reaction to a business message.
type InboundReaction struct {
	// MessageID is the wamid of the message reacted to.
	MessageID string `json:"message_id"`
	// Emoji is empty when the user removed the reaction.
	Emoji string `json:"emoji"`
}

// InboundUnsupported is a message of a type Parley does not read.
type InboundUnsupported struct {
	// Type is the raw type (order, system, unsupported, ...); an
	// interactive answer of another kind is "interactive.<its type>".
	Type string `json:"type"`
}

// readContent keeps the documented fields of the message's type. ok is
// false when a type Parley reads comes without its object (or, for
// contacts, without an array): the message is malformed.
func readContent(m *WebhookMessage) (c InboundContent, ok bool) {
	c.Type = m.Type
	media := func(w *WebhookMedia) *InboundMedia {
		if w == nil {
			return nil
		}
		return &InboundMedia{ID: w.ID, MimeType: w.MimeType, SHA256: w.SHA256, Caption: w.Caption, Filename: w.Filename, Animated: w.Animated, Voice: w.Voice}
	}
	switch m.Type {
	case "":
		return c, false
	case MessageTypeText:
		if m.Text == nil {
			return c, false
		}
		c.Text = &InboundText{Body: m.Text.Body}
	case MessageTypeButton:
		if m.Button == nil {
			return c, false
		}
		c.Button = &InboundButton{Payload: m.Button.Payload, Text: m.Button.Text}
	case MessageTypeInteractive:
		in := m.Interactive
		if in == nil {
			return c, false
		}
		var r *WebhookButtonReply
		switch in.Type {
		case InteractiveButtonReply:
			r = in.ButtonReply
		case InteractiveListReply:
			r = in.ListReply
		default:
			return unsupported("interactive." + in.Type), true
		}
		if r == nil {
			return c, false
		}
		c.Interactive = &InboundInteractive{Type: in.Type, ID: r.ID, Title: r.Title}
		if in.Type == InteractiveListReply {
			c.Interactive.Description = r.Description
		}
	case MessageTypeImage:
		c.Image = media(m.Image)
		return c, c.Image != nil
	case MessageTypeVideo:
		c.Video = media(m.Video)
		return c, c.Video != nil
	case MessageTypeAudio:
		c.Audio = media(m.Audio)
		return c, c.Audio != nil
	case MessageTypeDocument:
		c.Document = media(m.Document)
		return c, c.Document != nil
	case MessageTypeSticker:
		c.Sticker = media(m.Sticker)
		return c, c.Sticker != nil
	case MessageTypeLocation:
		if m.Location == nil {
			return c, false
		}
		l := *m.Location
		c.Location = &InboundLocation{Latitude: l.Latitude, Longitude: l.Longitude, Name: l.Name, Address: l.Address, URL: l.URL}
	case MessageTypeContacts:
		raw := bytes.TrimSpace(m.Contacts)
		if len(raw) == 0 || raw[0] != '[' {
			return c, false
		}
		var buf bytes.Buffer
		if json.Compact(&buf, raw) != nil {
			return c, false
		}
		c.Contacts = buf.Bytes()
	case MessageTypeReaction:
		if m.Reaction == nil {
			return c, false
		}
		c.Reaction = &InboundReaction{MessageID: m.Reaction.MessageID, Emoji: m.Reaction.Emoji}
	default:
		return unsupported(m.Type), true
	}
	return c, true
}

func unsupported(raw string) InboundContent {
	return InboundContent{Type: MessageTypeUnsupported, Unsupported: &InboundUnsupported{Type: raw}}
}

// MaxSummary is the longest Summary, in characters.
const MaxSummary = 200

// Summary is a short human line for lists and logs: the text body, the
// button's text, the chosen reply's title, "[image] caption", "[document]
// filename", "[location] name", "[contacts] name", "[reaction] 👍",
// "[reaction removed]", "[unsupported: order]"... Line breaks and other
// control characters become spaces, runs of spaces one; at most MaxSummary
// characters (cut with "…").
func (c InboundContent) Summary() string {
	tagged := func(tag, s string) string {
		if s = strings.TrimSpace(s); s == "" {
			return "[" + tag + "]"
		}
		return "[" + tag + "] " + s
	}
	var s string
	switch {
	case c.Text != nil:
		s = c.Text.Body
	case c.Button != nil:
		s = firstNonEmpty(c.Button.Text, c.Button.Payload)
	case c.Interactive != nil:
		s = firstNonEmpty(c.Interactive.Title, c.Interactive.ID)
	case c.Image != nil:
		s = tagged("image", c.Image.Caption)
	case c.Video != nil:
		s = tagged("video", c.Video.Caption)
	case c.Audio != nil:
		s = "[audio]"
		if c.Audio.Voice {
			s = "[voice note]"
		}
	case c.Document != nil:
		s = tagged("document", firstNonEmpty(c.Document.Caption, c.Document.Filename))
	case c.Sticker != nil:
		s = "[sticker]"
	case c.Location != nil:
		l := c.Location
		s = tagged("location", firstNonEmpty(l.Name, l.Address,
			strconv.FormatFloat(l.Latitude, 'f', -1, 64)+", "+strconv.FormatFloat(l.Longitude, 'f', -1, 64)))
	case c.Contacts != nil:
		s = tagged("contacts", contactNames(c.Contacts))
	case c.Reaction != nil:
		s = tagged("reaction", c.Reaction.Emoji)
		if c.Reaction.Emoji == "" {
			s = "[reaction removed]"
		}
	case c.Unsupported != nil:
		s = "[unsupported: " + c.Unsupported.Type + "]"
	default:
		s = "[" + c.Type + "]"
	}
	return oneLine(s, MaxSummary)
}

// contactNames is the formatted names of shared contact cards, comma
// separated.
func contactNames(raw json.RawMessage) string {
	var cards []struct {
		Name struct {
			FormattedName string `json:"formatted_name"`
		} `json:"name"`
	}
	_ = json.Unmarshal(raw, &cards)
	names := make([]string, 0, len(cards))
	for _, c := range cards {
		if n := strings.TrimSpace(c.Name.FormattedName); n != "" {
			names = append(names, n)
		}
	}
	return strings.Join(names, ", ")
}

// oneLine folds s to one line of at most n characters.
func oneLine(s string, n int) string {
	var b strings.Builder
	space := false
	count := 0
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			count++
			space = false
		}
		b.WriteRune(r)
		count++
	}
	out := b.String()
	if count <= n {
		return out
	}
	cut := 0
	for range n - 1 {
		_, size := utf8.DecodeRuneInString(out[cut:])
		cut += size
	}
	return strings.TrimRight(out[:cut], " ") + "…"
}
