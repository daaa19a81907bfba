package waba

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

// NewTemplate is a template to create through Parley: its definition as the
// provider takes it, the number whose WABA it goes to, and how Parley fills
// its parameters (as a template registered by hand: body bindings, a text
// header's value or a media header's default URL, URL buttons' default
// suffixes).
type NewTemplate struct {
	CompanyID          int64
	MessagingAccountID int64
	Definition         whatsapp.TemplateDefinition
	// BodyParameters bind the body's {{1}}, {{2}}, ... in order; there must
	// be one per variable.
	BodyParameters []whatsapp.Binding
	// HeaderText is the value of a TEXT header's {{1}} (required when the
	// header has one, refused otherwise).
	HeaderText string
	// HeaderMediaURL is the default image or video of a media header.
	HeaderMediaURL string
	// URLSuffixes are the default suffixes of the dynamic URL buttons (a
	// URL ending in {{1}}), in their order; at most one per button.
	URLSuffixes []string
}

var (
	nameRE        = regexp.MustCompile(`^[a-z0-9_]{1,512}$`)
	languageRE    = regexp.MustCompile(`^[a-z]{2,3}(_[A-Z]{2})?$`)
	placeholderRE = regexp.MustCompile(`\{\{\s*([A-Za-z0-9_]+)\s*\}\}`)
)

// InvalidError is a template Parley refuses before asking the provider:
// Field names what to change (name, language, category, parameter_format,
// components, header_text, header_media_url, body_parameters,
// url_buttons). It is ErrInvalid.
type InvalidError struct {
	Field, Msg string
}

func (e *InvalidError) Error() string        { return "invalid template: " + e.Field + ": " + e.Msg }
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Bindings checks a template to create and derives what Parley stores to
// send it: the header kind, the body bindings, the URL buttons' bases
// (their URL without the {{1}}) with their default suffixes. Parley sends
// positional parameters, and no one-time codes: NAMED parameters and
// AUTHENTICATION templates are refused (ErrInvalid), as are header formats
// it does not send (DOCUMENT, LOCATION).
func Bindings(n NewTemplate) (whatsapp.Template, error) {
	d := n.Definition
	if err := checkDefinition(d); err != nil {
		return whatsapp.Template{}, err
	}
	t := whatsapp.Template{Name: d.Name, Language: d.Language, HeaderKind: whatsapp.HeaderNone, BodyParameters: n.BodyParameters}
	body := 0
	for i, c := range d.Components {
		var err error
		switch strings.ToUpper(c.Type) {
		case "HEADER":
			err = header(&t, c, n)
		case "BODY":
			body++
			err = bodyBindings(c, n.BodyParameters)
		case "BUTTONS":
			err = urlButtons(&t, c, n.URLSuffixes)
		case "FOOTER":
		default:
			err = invalid("components", "components[%d]: type is HEADER, BODY, FOOTER or BUTTONS", i)
		}
		if err != nil {
			return whatsapp.Template{}, err
		}
	}
	switch {
	case body != 1:
		return whatsapp.Template{}, invalid("components", "a template has one BODY")
	case t.HeaderKind == whatsapp.HeaderNone && (n.HeaderText != "" || n.HeaderMediaURL != ""):
		return whatsapp.Template{}, invalid("header_text", "header_text and header_media_url need a header with a variable or media")
	case len(n.URLSuffixes) > len(t.URLButtons):
		return whatsapp.Template{}, invalid("url_buttons", "%d default suffixes for %d dynamic URL buttons", len(n.URLSuffixes), len(t.URLButtons))
	}
	return t, nil
}

func checkDefinition(d whatsapp.TemplateDefinition) error {
	switch {
	case !nameRE.MatchString(d.Name):
		return invalid("name", "%q: lowercase letters, digits and underscores", d.Name)
	case !languageRE.MatchString(d.Language):
		return invalid("language", "%q: a language code such as en or en_US", d.Language)
	case d.Category == whatsapp.CategoryAuthentication:
		return invalid("category", "AUTHENTICATION: Parley does not send one-time codes; create it at the provider")
	case d.Category != whatsapp.CategoryMarketing && d.Category != whatsapp.CategoryUtility:
		return invalid("category", "%q: MARKETING or UTILITY", d.Category)
	case d.ParameterFormat != "" && d.ParameterFormat != "POSITIONAL":
		return invalid("parameter_format", "%q: Parley sends POSITIONAL parameters ({{1}}, {{2}}, ...)", d.ParameterFormat)
	case len(d.Components) == 0:
		return invalid("components", "a template has at least a BODY")
	}
	return nil
}

// positional returns the number of variables of text, which must be
// {{1}}, {{2}}, ... in their order of first use.
func positional(where, text string) (int, error) {
	seen := map[string]bool{}
	n := 0
	for _, m := range placeholderRE.FindAllStringSubmatch(text, -1) {
		if seen[m[1]] {
			continue
		}
		seen[m[1]] = true
		n++
		if m[1] != strconv.Itoa(n) {
			return 0, invalid("components", "%s: variables are {{1}}, {{2}}, ... in order, not {{%s}}", where, m[1])
		}
	}
	return n, nil
}

func header(t *whatsapp.Template, c whatsapp.TemplateComponent, n NewTemplate) error {
	switch strings.ToUpper(c.Format) {
	case "TEXT":
		vars, err := positional("header", c.Text)
		switch {
		case err != nil:
			return err
		case vars > 1:
			return invalid("components", "header: a TEXT header has at most one variable")
		case vars == 1 && n.HeaderText == "":
			return invalid("header_text", "the value of the header's {{1}} is required")
		case vars == 0 && n.HeaderText != "":
			return invalid("header_text", "the header has no variable")
		case vars == 1:
			t.HeaderKind, t.HeaderText = whatsapp.HeaderText, n.HeaderText
		}
		if n.HeaderMediaURL != "" {
			return invalid("header_media_url", "the header is TEXT")
		}
	case "IMAGE", "VIDEO":
		if n.HeaderText != "" {
			return invalid("header_text", "the header is %s", strings.ToUpper(c.Format))
		}
		t.HeaderKind, t.HeaderMediaURL = whatsapp.HeaderKind(strings.ToLower(c.Format)), n.HeaderMediaURL
	default:
		return invalid("components", "header format %q: Parley sends TEXT, IMAGE and VIDEO headers", c.Format)
	}
	return nil
}

func bodyBindings(c whatsapp.TemplateComponent, bs []whatsapp.Binding) error {
	vars, err := positional("body", c.Text)
	if err != nil {
		return err
	}
	if vars != len(bs) {
		return invalid("body_parameters", "the body has %d variables and %d bindings", vars, len(bs))
	}
	return nil
}

func urlButtons(t *whatsapp.Template, c whatsapp.TemplateComponent, suffixes []string) error {
	for _, b := range c.Buttons {
		if strings.ToUpper(b.Type) != "URL" || !strings.Contains(b.URL, "{{") {
			continue
		}
		base, ok := strings.CutSuffix(b.URL, "{{1}}")
		if !ok || strings.Contains(base, "{{") {
			return invalid("components", "buttons: a dynamic URL ends in {{1}} (%q)", b.URL)
		}
		if len(t.URLButtons) == 2 {
			return invalid("components", "buttons: at most two dynamic URL buttons")
		}
		btn := whatsapp.URLButton{Base: base}
		if i := len(t.URLButtons); i < len(suffixes) {
			btn.DefaultSuffix = suffixes[i]
		}
		t.URLButtons = append(t.URLButtons, btn)
	}
	return nil
}
