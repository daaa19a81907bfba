package whatsapp

import (
	"errors"
	"strconv"
	"strings"

	"github.com/parleyhq/parley/pkg/phone"
)

// The wire types of a template send, as the Cloud API takes them. The
// client marshals them; provider-sim unmarshals them.

// TemplateMessage is the body of POST /{version}/{phone_number_id}/messages
// for a template message.
type TemplateMessage struct {
	MessagingProduct string          `json:"messaging_product"`
	RecipientType    string          `json:"recipient_type"`
	To               string          `json:"to"`
	Type             string          `json:"type"`
	Template         TemplatePayload `json:"template"`
}

// TemplatePayload is the template object of a template message.
type TemplatePayload struct {
	Name       string      `json:"name"`
	Language   Language    `json:"language"`
	Components []Component `json:"components,omitempty"`
}

// Language is the template's language; Code is e.g. en_US.
type Language struct {
	Code string `json:"code"`
}

// Component is one of the template's header, body or button parts.
type Component struct {
	// Type is header, body or button.
	Type string `json:"type"`
	// SubType is url for a URL button.
	SubType string `json:"sub_type,omitempty"`
	// Index is the button's position among the template's buttons, "0".."9".
	Index      string      `json:"index,omitempty"`
	Parameters []Parameter `json:"parameters"`
}

// Parameter is one value of a component: text, or a media link.
type Parameter struct {
	// Type is text, image or video.
	Type  string     `json:"type"`
	Text  string     `json:"text,omitempty"`
	Image *MediaLink `json:"image,omitempty"`
	Video *MediaLink `json:"video,omitempty"`
}

// MediaLink is media the provider downloads from a public URL.
type MediaLink struct {
	Link string `json:"link"`
}

// Values of the fixed fields of a template message.
const (
	MessagingProduct    = "whatsapp"
	RecipientIndividual = "individual"
	MessageTypeTemplate = "template"
)

// Binding sources (Binding.Source).
const (
	SourceFirstName = "first_name"
	SourceLastName  = "last_name"
	SourcePhone     = "phone"
	SourceVariable  = "variable"
	SourceLiteral   = "literal"
)

// ErrInvalidMessage is matched (errors.Is) by every RenderError.
var ErrInvalidMessage = errors.New("whatsapp: invalid message")

// RenderError says why a message cannot be built from its template and
// recipient. It is found before any call to the provider, and it is
// Permanent: sending the same data again fails the same way. It names the
// part at fault, never the recipient's data.
type RenderError struct {
	// Code is Parley's own error code (CodeVariableMissing, ...), recorded
	// as the message's error code; zero reads as CodeCannotRender.
	Code int
	// Part is what could not be filled, e.g. "body parameter 2 (variable order_id)".
	Part   string
	Reason string
}

// Parley's own error codes for a message that cannot be built from its
// template and recipient, recorded in the message's error_code like the
// provider's codes (which never reach 900000).
const (
	// CodeCannotRender is any other problem of the template (an unknown
	// source or header kind, no name, too many buttons).
	CodeCannotRender = 900000
	// CodeVariableMissing: a body parameter is empty and has no default.
	CodeVariableMissing = 900001
	// CodeMediaMissing: a media header has no link anywhere.
	CodeMediaMissing = 900002
	// CodeButtonSuffixMissing: a URL button has no suffix and no default.
	CodeButtonSuffixMissing = 900003
	// CodeInvalidRecipient: the number is not E.164.
	CodeInvalidRecipient = 900004
)

// renderTitles are the short titles of Parley's codes.
var renderTitles = map[int]string{
	CodeCannotRender:        "Template cannot be rendered",
	CodeVariableMissing:     "Template variable missing",
	CodeMediaMissing:        "Header media missing",
	CodeButtonSuffixMissing: "URL button suffix missing",
	CodeInvalidRecipient:    "Invalid recipient number",
	CodeInvalidSession:      "Session message invalid",
}

// ErrorCode is the error's code (CodeCannotRender when unset).
func (e *RenderError) ErrorCode() int {
	if _, ok := renderTitles[e.Code]; ok {
		return e.Code
	}
	return CodeCannotRender
}

// Title is the code's title and what is missing, e.g. "Template variable
// missing: body parameter 2 (variable order_id) is empty and has no default".
func (e *RenderError) Title() string {
	return renderTitles[e.ErrorCode()] + ": " + e.Part + ": " + e.Reason
}

func (e *RenderError) Error() string {
	return "whatsapp: cannot render " + e.Part + ": " + e.Reason
}

// Is makes errors.Is(err, ErrInvalidMessage) true.
func (e *RenderError) Is(target error) bool { return target == ErrInvalidMessage }

// BuildTemplateMessage renders the Cloud API body of one template message:
//   - to is the recipient's number in digits, without '+';
//   - a header component when the template has a media header (the media
//     link: the contact's image_url/video_url, else the request's override,
//     else the template's default) or a text header with a parameter value
//     (HeaderText; a text header without it is static and sends nothing);
//   - a body component with one text parameter per binding, in order, each
//     falling back to the binding's Default when the bound value is empty;
//   - one url button component per URL button (index 0 and 1), whose
//     suffix is the override (Overrides.URL, URL2: the part after the
//     button's Base when it starts with it, else the whole value) or the
//     button's DefaultSuffix.
//
// A value the provider requires that is empty after every fallback is a
// *RenderError rather than a request the provider would refuse (131008).
func BuildTemplateMessage(tpl Template, to Recipient, ov Overrides) (TemplateMessage, error) {
	number, ok := phone.Normalize(to.Phone)
	if !ok {
		return TemplateMessage{}, &RenderError{Code: CodeInvalidRecipient, Part: "recipient", Reason: "phone is not an E.164 number"}
	}
	if tpl.Name == "" {
		return TemplateMessage{}, &RenderError{Part: "template", Reason: "name is empty"}
	}
	lang := tpl.Language
	if lang == "" {
		lang = "en_US"
	}
	msg := TemplateMessage{
		MessagingProduct: MessagingProduct,
		RecipientType:    RecipientIndividual,
		To:               number[1:],
		Type:             MessageTypeTemplate,
		Template:         TemplatePayload{Name: tpl.Name, Language: Language{Code: lang}},
	}
	comps := make([]Component, 0, 2+len(tpl.URLButtons))

	header, err := headerComponent(tpl, to, ov)
	if err != nil {
		return TemplateMessage{}, err
	}
	if header != nil {
		comps = append(comps, *header)
	}

	if len(tpl.BodyParameters) > 0 {
		params := make([]Parameter, 0, len(tpl.BodyParameters))
		for i, b := range tpl.BodyParameters {
			v, err := bindingValue(i, b, to)
			if err != nil {
				return TemplateMessage{}, err
			}
			params = append(params, Parameter{Type: "text", Text: v})
		}
		comps = append(comps, Component{Type: "body", Parameters: params})
	}

	if len(tpl.URLButtons) > 2 {
		return TemplateMessage{}, &RenderError{Part: "buttons", Reason: "at most two URL buttons"}
	}
	for i, b := range tpl.URLButtons {
		override := ov.URL
		if i == 1 {
			override = ov.URL2
		}
		suffix := buttonSuffix(b, override)
		if suffix == "" {
			return TemplateMessage{}, &RenderError{
				Code:   CodeButtonSuffixMissing,
				Part:   "URL button " + strconv.Itoa(i),
				Reason: "no suffix: no override and no default",
			}
		}
		comps = append(comps, Component{
			Type:       "button",
			SubType:    "url",
			Index:      strconv.Itoa(i),
			Parameters: []Parameter{{Type: "text", Text: suffix}},
		})
	}

	if len(comps) > 0 {
		msg.Template.Components = comps
	}
	return msg, nil
}

func headerComponent(tpl Template, to Recipient, ov Overrides) (*Component, error) {
	switch tpl.HeaderKind {
	case "", HeaderNone:
		return nil, nil
	case HeaderText:
		if tpl.HeaderText == "" {
			return nil, nil
		}
		return &Component{Type: "header", Parameters: []Parameter{{Type: "text", Text: tpl.HeaderText}}}, nil
	case HeaderImage:
		link := firstNonEmpty(to.ImageURL, ov.ImageURL, tpl.HeaderMediaURL)
		if link == "" {
			return nil, &RenderError{Code: CodeMediaMissing, Part: "image header", Reason: "no image URL on the contact, the request or the template"}
		}
		return &Component{Type: "header", Parameters: []Parameter{{Type: "image", Image: &MediaLink{Link: link}}}}, nil
	case HeaderVideo:
		link := firstNonEmpty(to.VideoURL, ov.VideoURL, tpl.HeaderMediaURL)
		if link == "" {
			return nil, &RenderError{Code: CodeMediaMissing, Part: "video header", Reason: "no video URL on the contact, the request or the template"}
		}
		return &Component{Type: "header", Parameters: []Parameter{{Type: "video", Video: &MediaLink{Link: link}}}}, nil
	}
	return nil, &RenderError{Part: "header", Reason: "unknown header kind " + strconv.Quote(string(tpl.HeaderKind))}
}

func bindingValue(i int, b Binding, to Recipient) (string, error) {
	var v string
	part := func() string { return "body parameter " + strconv.Itoa(i+1) + " (" + b.Source + ")" }
	switch b.Source {
	case SourceFirstName:
		v = to.FirstName
	case SourceLastName:
		v = to.LastName
	case SourcePhone:
		v = to.Phone
	case SourceVariable:
		v = to.Variables[b.Name]
		part = func() string { return "body parameter " + strconv.Itoa(i+1) + " (variable " + b.Name + ")" }
	case SourceLiteral:
		v = b.Value
	default:
		return "", &RenderError{Part: part(), Reason: "unknown source"}
	}
	if strings.TrimSpace(v) == "" {
		v = b.Default
	}
	if strings.TrimSpace(v) == "" {
		return "", &RenderError{Code: CodeVariableMissing, Part: part(), Reason: "empty and no default"}
	}
	return v, nil
}

func buttonSuffix(b URLButton, override string) string {
	if override == "" {
		return b.DefaultSuffix
	}
	if b.Base != "" && strings.HasPrefix(override, b.Base) {
		return override[len(b.Base):]
	}
	return override
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
