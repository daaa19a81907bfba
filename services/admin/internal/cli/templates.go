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
}

type urlButtonView struct {
	Base          string `json:"base"`
	DefaultSuffix string `json:"default_suffix,omitempty"`
}

func viewTemplate(t catalog.Template) templateView {
	v := templateView{ID: t.ID, CompanyID: t.CompanyID, Name: t.Name, Language: t.Language, HeaderKind: string(t.HeaderKind),
		HeaderText: t.HeaderText, HeaderMediaURL: t.HeaderMediaURL, BodyParameters: t.BodyParameters,
		URLButtons: []urlButtonView{}, CreatedAt: t.CreatedAt}
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

func (e *env) showTemplate(co catalog.Company, t catalog.Template) error {
	v := viewTemplate(t)
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
		fields(w, append(pairs, "created", fmtTime(v.CreatedAt))...)
	})
}

func bodySummary(bs []whatsapp.Binding) string {
	parts := make([]string, len(bs))
	for i, b := range bs {
		parts[i] = formatBinding(b)
	}
	return strings.Join(parts, ", ")
}

func templatesCmd(e *env) *cobra.Command {
	return group("templates", "Register and list message templates and how their parameters are filled",
		templatesCreateCmd(e), templatesListCmd(e))
}

func templatesCreateCmd(e *env) *cobra.Command {
	var company, name, language, header, headerText, mediaURL string
	var body []string
	var b1, s1, b2, s2 string
	c := &cobra.Command{
		Use:   "create",
		Short: "Register a provider template: header, body parameter bindings, URL buttons",
		Example: `  parleyctl templates create --company acme --name order_update --language en_US \
      --header image --header-media-url https://cdn.acme.example/banner.png \
      --body 'first_name=there,var:order_id' \
      --url-button-1 https://acme.example/orders/ --url-button-1-suffix latest
  parleyctl templates create --company acme --name welcome --header text --header-text "Welcome!" --body 'literal:Hi,first_name'`,
		Args: noArgs,
		RunE: run(func(ctx context.Context, _ []string) error {
			if !templateNameRe.MatchString(name) {
				return usagef("--name %q: the provider's template name, a-z, 0-9 and '_'", name)
			}
			t := whatsapp.Template{Name: name, Language: language, HeaderKind: whatsapp.HeaderKind(header)}
			switch t.HeaderKind {
			case whatsapp.HeaderNone:
				if headerText != "" || mediaURL != "" {
					return usagef("--header none takes no --header-text or --header-media-url")
				}
			case whatsapp.HeaderText:
				if headerText == "" || mediaURL != "" {
					return usagef("--header text needs --header-text (and no --header-media-url)")
				}
				t.HeaderText = headerText
			case whatsapp.HeaderImage, whatsapp.HeaderVideo:
				if headerText != "" {
					return usagef("--header %s takes --header-media-url, not --header-text", header)
				}
				if mediaURL != "" {
					if err := checkURL("--header-media-url", mediaURL); err != nil {
						return err
					}
				}
				t.HeaderMediaURL = mediaURL
			default:
				return usagef("--header %q: none, text, image or video", header)
			}
			for _, s := range body {
				b, err := parseBinding(s)
				if err != nil {
					return usageError{err}
				}
				t.BodyParameters = append(t.BodyParameters, b)
			}
			switch {
			case b1 == "" && (s1 != "" || b2 != "" || s2 != ""):
				return usagef("--url-button-1 is needed before a suffix or a second button")
			case b2 == "" && s2 != "":
				return usagef("--url-button-2-suffix needs --url-button-2")
			}
			for i, b := range [][2]string{{b1, s1}, {b2, s2}} {
				if b[0] == "" {
					continue
				}
				if err := checkURL(fmt.Sprintf("--url-button-%d", i+1), b[0]); err != nil {
					return err
				}
				t.URLButtons = append(t.URLButtons, whatsapp.URLButton{Base: b[0], DefaultSuffix: b[1]})
			}
			cat, co, err := e.withCompany(ctx, company)
			if err != nil {
				return err
			}
			created, err := cat.CreateTemplate(ctx, catalog.NewTemplate{CompanyID: co.ID, Template: t})
			if errors.Is(err, catalog.ErrConflict) {
				return fmt.Errorf("template %q (%s) already exists in company %q", name, language, co.Slug)
			}
			if err != nil {
				return err
			}
			return e.showTemplate(co, created)
		}),
	}
	companyFlag(c, &company)
	f := c.Flags()
	f.StringVar(&name, "name", "", "the provider's template name (required)")
	f.StringVar(&language, "language", "en_US", "the provider's language code")
	f.StringVar(&header, "header", "none", "header kind: none, text, image or video")
	f.StringVar(&headerText, "header-text", "", "the header's text (--header text)")
	f.StringVar(&mediaURL, "header-media-url", "", "default image or video URL when the request and contact give none")
	f.StringSliceVar(&body, "body", nil, "body parameters {{1}}, {{2}}, ... in order, comma-separated or repeated:\n"+
		"first_name, last_name, phone, var:<name> (each with an optional =default), literal:<text>;\n"+
		`quote an element that holds a comma: --body '"literal:Hi, you",first_name'`)
	f.StringVar(&b1, "url-button-1", "", "the first URL button's fixed base, e.g. https://shop.example/orders/")
	f.StringVar(&s1, "url-button-1-suffix", "", "the first URL button's default dynamic suffix")
	f.StringVar(&b2, "url-button-2", "", "the second URL button's fixed base")
	f.StringVar(&s2, "url-button-2-suffix", "", "the second URL button's default dynamic suffix")
	_ = c.MarkFlagRequired("name")
	return c
}

func templatesListCmd(e *env) *cobra.Command {
	return companyList[catalog.Template, templateView]{
		noun: "templates", short: "List a company's templates", empty: "no templates",
		header: []string{"ID", "NAME", "LANGUAGE", "HEADER", "BODY", "URL BUTTONS", "CREATED"},
		load:   (*catalog.Store).Templates,
		each: func(t catalog.Template) (templateView, []string) {
			v := viewTemplate(t)
			return v, []string{fmtID(v.ID), v.Name, v.Language, v.HeaderKind, orDash(bodySummary(v.BodyParameters)), fmt.Sprint(len(v.URLButtons)), fmtTime(v.CreatedAt)}
		},
	}.cmd(e)
}
