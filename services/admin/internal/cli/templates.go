package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

var templateNameRe = regexp.MustCompile(`^[a-z0-9_]{1,512}$`)

// templateView is a template as shown; body bindings read as on the
// command line (first_name=there, var:order_id, literal:Hi).
type templateView struct {
	ID             int64              `json:"id"`
	CompanyID      int64              `json:"company_id"`
	Name           string             `json:"name"`
	Language       string             `json:"language"`
	HeaderKind     string             `json:"header_kind"`
	HeaderText     string             `json:"header_text,omitempty"`
	HeaderMediaURL string             `json:"header_media_url,omitempty"`
	BodyParameters []whatsapp.Binding `json:"body_parameters"`
	URLButtons     []urlButtonView    `json:"url_buttons"`
	CreatedAt      time.Time          `json:"created_at"`
	// The template at the provider (see catalog.TemplateState).
	Status             string                  `json:"status"`
	StatusReason       string                  `json:"status_reason"`
	Category           string                  `json:"category"`
	Quality            string                  `json:"quality"`
	PauseCount         int                     `json:"pause_count"`
	PausedUntil        *time.Time              `json:"paused_until"`
	ProviderTemplateID string                  `json:"provider_template_id"`
	MessagingAccountID *int64                  `json:"messaging_account_id"`
	History            []catalog.TemplateEvent `json:"history,omitempty"`
}

type urlButtonView struct {
	Base          string `json:"base"`
	DefaultSuffix string `json:"default_suffix,omitempty"`
}

func viewTemplate(t catalog.Template) templateView {
	v := templateView{ID: t.ID, CompanyID: t.CompanyID, Name: t.Name, Language: t.Language, HeaderKind: string(t.HeaderKind),
		HeaderText: t.HeaderText, HeaderMediaURL: t.HeaderMediaURL, BodyParameters: t.BodyParameters,
		URLButtons: []urlButtonView{}, CreatedAt: t.CreatedAt, Status: t.Status, StatusReason: t.StatusReason, Category: t.Category,
		Quality: t.Quality, PauseCount: t.PauseCount, PausedUntil: t.PausedUntil, ProviderTemplateID: t.ProviderTemplateID,
		MessagingAccountID: t.MessagingAccountID}
	if v.BodyParameters == nil {
		v.BodyParameters = []whatsapp.Binding{}
	}
	for _, b := range t.URLButtons {
		v.URLButtons = append(v.URLButtons, urlButtonView{Base: b.Base, DefaultSuffix: b.DefaultSuffix})
	}
	return v
}

// parseBinding reads one body parameter:
//
//	first_name | last_name | phone | var:<name>   each optionally =<default>
//	literal:<text>                               the text as it is
func parseBinding(s string) (whatsapp.Binding, error) {
	s = strings.TrimLeft(s, " ")
	if text, ok := strings.CutPrefix(s, "literal:"); ok {
		if text == "" {
			return whatsapp.Binding{}, fmt.Errorf("body parameter %q: literal text is empty", s)
		}
		return whatsapp.Binding{Source: "literal", Value: text}, nil
	}
	src, def, _ := strings.Cut(s, "=")
	src = strings.TrimSpace(src)
	switch {
	case src == "first_name" || src == "last_name" || src == "phone":
		return whatsapp.Binding{Source: src, Default: def}, nil
	case strings.HasPrefix(src, "var:"):
		name := strings.TrimPrefix(src, "var:")
		if name == "" || len(name) > 100 {
			return whatsapp.Binding{}, fmt.Errorf("body parameter %q: a variable name of 1 to 100 characters", s)
		}
		return whatsapp.Binding{Source: "variable", Name: name, Default: def}, nil
	}
	return whatsapp.Binding{}, fmt.Errorf("body parameter %q: first_name, last_name, phone, var:<name> (each with an optional =default) or literal:<text>", s)
}

// formatBinding is parseBinding's inverse, for tables.
func formatBinding(b whatsapp.Binding) string {
	var s string
	switch b.Source {
	case "literal":
		return "literal:" + b.Value
	case "variable":
		s = "var:" + b.Name
	default:
		s = b.Source
	}
	if b.Default != "" {
		s += "=" + b.Default
	}
	return s
}

func checkURL(flag, s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("%s %q is not an http(s) URL", flag, s)
	}
	return nil
}

func (e *env) showTemplate(co catalog.Company, t catalog.Template, history []catalog.TemplateEvent) error {
	v := viewTemplate(t)
	v.History = history
	return e.emit(v, func(w io.Writer) {
		header := v.HeaderKind
		switch {
		case v.HeaderText != "":
			header += ": " + v.HeaderText
		case v.HeaderMediaURL != "":
			header += ": " + v.HeaderMediaURL
		}
		pairs := []string{"id", fmtID(v.ID), "company", co.Slug, "name", v.Name, "language", v.Language, "header", header,
			"body", orDash(bodySummary(v.BodyParameters))}
		for i, b := range v.URLButtons {
			pairs = append(pairs, fmt.Sprintf("url button %d", i+1), b.Base+"{{1}} (default suffix "+orDash(b.DefaultSuffix)+")")
		}
		pairs = append(pairs, "status", statusText(v), "category", v.Category, "quality", v.Quality,
			"paused until", fmtTimePtr(v.PausedUntil), "pauses", fmt.Sprint(v.PauseCount), "provider id", orDash(v.ProviderTemplateID))
		fields(w, append(pairs, "created", fmtTime(v.CreatedAt))...)
		if len(history) > 0 {
			fmt.Fprintln(w)
			rows := make([][]string, len(history))
			for i, h := range history {
				rows[i] = []string{fmtTime(h.At), orDash(h.PreviousStatus), h.Status, orDash(h.Reason), h.Source}
			}
			table(w, "", []string{"AT", "FROM", "TO", "REASON", "SOURCE"}, rows)
		}
	})
}

// statusText is a template's status with its reason: "REJECTED (SCAM)".
func statusText(v templateView) string {
	if v.StatusReason == "" {
		return v.Status
	}
	return v.Status + " (" + v.StatusReason + ")"
}

func bodySummary(bs []whatsapp.Binding) string {
	parts := make([]string, len(bs))
	for i, b := range bs {
		parts[i] = formatBinding(b)
	}
	return strings.Join(parts, ", ")
}

func templatesCmd(e *env) *cobra.Command {
	return group("templates", "Create (through the provider), register, list and show message templates and how their parameters are filled",
		templatesCreateCmd(e), templatesListCmd(e), templatesShowCmd(e))
}

// templateFlags are templates create's flags.
type templateFlags struct {
	company, name, language, header, headerText, mediaURL string
	body                                                  []string
	b1, s1, b2, s2                                        string
	account, category, components                         string
}

func templatesCreateCmd(e *env) *cobra.Command {
	var tf templateFlags
	c := &cobra.Command{
		Use:   "create",
		Short: "Create a template through the provider (--account), or register one the provider already approved",
		Long: `With --account, the template is submitted to the WhatsApp Business Account of that messaging
account: its definition (--category and --components, a JSON array of the provider's components, from
a file or - for stdin) goes to the provider, and Parley keeps it PENDING until the provider approves
or rejects it. The header kind and the URL buttons' bases come from the components; --header-text is
the value of a TEXT header's {{1}}, --url-button-N-suffix a dynamic URL button's default suffix.

Without --account, the template is registered by hand: one the provider already has, APPROVED.`,
		Example: `  parleyctl templates create --company acme --account 2 --name order_update --category UTILITY \
      --body 'first_name=there,var:order_id' --header-text update --url-button-1-suffix latest --components - <<'EOF'
  [{"type": "HEADER", "format": "TEXT", "text": "Order {{1}}"},
   {"type": "BODY", "text": "Hi {{1}}, your order {{2}} has shipped."},
   {"type": "BUTTONS", "buttons": [{"type": "URL", "text": "Track", "url": "https://acme.example/track/{{1}}"}]}]
  EOF
  parleyctl templates create --company acme --name order_update --language en_US \
      --header image --header-media-url https://cdn.acme.example/banner.png \
      --body 'first_name=there,var:order_id' \
      --url-button-1 https://acme.example/orders/ --url-button-1-suffix latest
  parleyctl templates create --company acme --name welcome --header text --header-text "Welcome!" --body 'literal:Hi,first_name'`,
		Args: noArgs,
	}
	c.RunE = run(func(ctx context.Context, _ []string) error {
		if !templateNameRe.MatchString(tf.name) {
			return usagef("--name %q: the provider's template name, a-z, 0-9 and '_'", tf.name)
		}
		bindings, err := parseBindings(tf.body)
		if err != nil {
			return err
		}
		if tf.account != "" {
			return e.submitTemplate(ctx, c, tf, bindings)
		}
		if tf.category != "" || tf.components != "" {
			return usagef("--category and --components go with --account (a template submitted to the provider)")
		}
		return e.registerTemplate(ctx, tf, bindings)
	})
	companyFlag(c, &tf.company)
	f := c.Flags()
	f.StringVar(&tf.name, "name", "", "the provider's template name (required)")
	f.StringVar(&tf.language, "language", "en_US", "the provider's language code")
	f.StringVar(&tf.account, "account", "", "submit to the provider through this messaging account's WhatsApp Business Account (its id)")
	f.StringVar(&tf.category, "category", "", "with --account: MARKETING or UTILITY")
	f.StringVar(&tf.components, "components", "", "with --account: the provider's components, a JSON array, from a file or - for stdin")
	f.StringVar(&tf.header, "header", "none", "without --account: header kind none, text, image or video")
	f.StringVar(&tf.headerText, "header-text", "", "the header's text (the value of a TEXT header's {{1}})")
	f.StringVar(&tf.mediaURL, "header-media-url", "", "default image or video URL when the request and contact give none")
	f.StringSliceVar(&tf.body, "body", nil, "body parameters {{1}}, {{2}}, ... in order, comma-separated or repeated:\n"+
		"first_name, last_name, phone, var:<name> (each with an optional =default), literal:<text>;\n"+
		`quote an element that holds a comma: --body '"literal:Hi, you",first_name'`)
	f.StringVar(&tf.b1, "url-button-1", "", "without --account: the first URL button's fixed base, e.g. https://shop.example/orders/")
	f.StringVar(&tf.s1, "url-button-1-suffix", "", "the first URL button's default dynamic suffix")
	f.StringVar(&tf.b2, "url-button-2", "", "without --account: the second URL button's fixed base")
	f.StringVar(&tf.s2, "url-button-2-suffix", "", "the second URL button's default dynamic suffix")
	_ = c.MarkFlagRequired("name")
	return c
}

func parseBindings(body []string) ([]whatsapp.Binding, error) {
	var out []whatsapp.Binding
	for _, s := range body {
		b, err := parseBinding(s)
		if err != nil {
			return nil, usageError{err}
		}
		out = append(out, b)
	}
	return out, nil
}

// registerTemplate registers a template the provider already approved.
func (e *env) registerTemplate(ctx context.Context, tf templateFlags, bindings []whatsapp.Binding) error {
	t := whatsapp.Template{Name: tf.name, Language: tf.language, HeaderKind: whatsapp.HeaderKind(tf.header), BodyParameters: bindings}
	if err := headerOf(&t, tf); err != nil {
		return err
	}
	switch {
	case tf.b1 == "" && (tf.s1 != "" || tf.b2 != "" || tf.s2 != ""):
		return usagef("--url-button-1 is needed before a suffix or a second button")
	case tf.b2 == "" && tf.s2 != "":
		return usagef("--url-button-2-suffix needs --url-button-2")
	}
	for i, b := range [][2]string{{tf.b1, tf.s1}, {tf.b2, tf.s2}} {
		if b[0] == "" {
			continue
		}
		if err := checkURL(fmt.Sprintf("--url-button-%d", i+1), b[0]); err != nil {
			return err
		}
		t.URLButtons = append(t.URLButtons, whatsapp.URLButton{Base: b[0], DefaultSuffix: b[1]})
	}
	cat, co, err := e.withCompany(ctx, tf.company)
	if err != nil {
		return err
	}
	created, err := cat.CreateTemplate(ctx, catalog.NewTemplate{CompanyID: co.ID, Template: t})
	if errors.Is(err, catalog.ErrConflict) {
		return fmt.Errorf("template %q (%s) already exists in company %q", tf.name, tf.language, co.Slug)
	}
	if err != nil {
		return err
	}
	return e.showTemplate(co, created, nil)
}

// headerOf checks the header flags of a template registered by hand.
func headerOf(t *whatsapp.Template, tf templateFlags) error {
	switch t.HeaderKind {
	case whatsapp.HeaderNone:
		if tf.headerText != "" || tf.mediaURL != "" {
			return usagef("--header none takes no --header-text or --header-media-url")
		}
	case whatsapp.HeaderText:
		if tf.headerText == "" || tf.mediaURL != "" {
			return usagef("--header text needs --header-text (and no --header-media-url)")
		}
		t.HeaderText = tf.headerText
	case whatsapp.HeaderImage, whatsapp.HeaderVideo:
		if tf.headerText != "" {
			return usagef("--header %s takes --header-media-url, not --header-text", tf.header)
		}
		if tf.mediaURL != "" {
			if err := checkURL("--header-media-url", tf.mediaURL); err != nil {
				return err
			}
		}
		t.HeaderMediaURL = tf.mediaURL
	default:
		return usagef("--header %q: none, text, image or video", tf.header)
	}
	return nil
}

func templatesListCmd(e *env) *cobra.Command {
	return companyList[catalog.Template, templateView]{
		noun: "templates", short: "List a company's templates", empty: "no templates",
		header: []string{"ID", "NAME", "LANGUAGE", "CATEGORY", "STATUS", "QUALITY", "PAUSED UNTIL", "HEADER", "BODY", "URL BUTTONS"},
		load:   (*catalog.Store).Templates,
		each: func(t catalog.Template) (templateView, []string) {
			v := viewTemplate(t)
			return v, []string{fmtID(v.ID), v.Name, v.Language, v.Category, statusText(v), v.Quality, fmtTimePtr(v.PausedUntil),
				v.HeaderKind, orDash(bodySummary(v.BodyParameters)), fmt.Sprint(len(v.URLButtons))}
		},
	}.cmd(e)
}
