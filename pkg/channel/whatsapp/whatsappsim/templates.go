package whatsappsim

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

// TemplateSpec is an approved template as the provider knows it: what
// parameters a send of it must carry. While no template is registered the
// simulator accepts any name; once one is, sends of other names (or other
// languages) get 132001 and sends whose parameters do not fit get 132000
// or 132012, as the real API checks against the approved template.
type TemplateSpec struct {
	Name     string `json:"name"`
	Language string `json:"language"`
	// Header is none, text (with one parameter), image or video.
	Header whatsapp.HeaderKind `json:"header"`
	// BodyParameters is the number of {{n}} in the body.
	BodyParameters int `json:"body_parameters"`
	// URLButtons is the number of URL buttons with a dynamic suffix (0..2).
	URLButtons int `json:"url_buttons"`
}

func templateKey(name, lang string) string { return name + "\x00" + lang }

// SetTemplate registers (or replaces) an approved template.
func (s *Sim) SetTemplate(t TemplateSpec) error {
	switch {
	case t.Name == "" || t.Language == "":
		return fmt.Errorf("whatsappsim: template needs a name and a language")
	case t.BodyParameters < 0 || t.URLButtons < 0 || t.URLButtons > 2:
		return fmt.Errorf("whatsappsim: template %s: body_parameters >= 0, url_buttons 0..2", t.Name)
	}
	switch t.Header {
	case "":
		t.Header = whatsapp.HeaderNone
	case whatsapp.HeaderNone, whatsapp.HeaderText, whatsapp.HeaderImage, whatsapp.HeaderVideo:
	default:
		return fmt.Errorf("whatsappsim: template %s: header is none, text, image or video", t.Name)
	}
	s.accMu.Lock()
	defer s.accMu.Unlock()
	old := *s.templates.Load()
	next := make(map[string]TemplateSpec, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[templateKey(t.Name, t.Language)] = t
	s.templates.Store(&next)
	return nil
}

// RemoveTemplate unregisters a template; it reports whether it was there.
func (s *Sim) RemoveTemplate(name, lang string) bool {
	s.accMu.Lock()
	defer s.accMu.Unlock()
	old := *s.templates.Load()
	key := templateKey(name, lang)
	if _, ok := old[key]; !ok {
		return false
	}
	next := make(map[string]TemplateSpec, len(old))
	for k, v := range old {
		if k != key {
			next[k] = v
		}
	}
	s.templates.Store(&next)
	return true
}

// Templates lists the registered templates.
func (s *Sim) Templates() []TemplateSpec {
	m := *s.templates.Load()
	out := make([]TemplateSpec, 0, len(m))
	for _, t := range m {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Language < out[j].Language
	})
	return out
}

// checkTemplate holds a send against its registered template.
func (s *Sim) checkTemplate(m *whatsapp.TemplateMessage) *apiError {
	reg := *s.templates.Load()
	if len(reg) == 0 {
		return nil
	}
	spec, ok := reg[templateKey(m.Template.Name, m.Template.Language.Code)]
	if !ok {
		return errNoTemplate(m.Template.Name, m.Template.Language.Code)
	}
	var header *whatsapp.Component
	body, buttons := 0, 0
	for i := range m.Template.Components {
		c := &m.Template.Components[i]
		switch c.Type {
		case "header":
			header = c
		case "body":
			body += len(c.Parameters)
		case "button":
			buttons++
		}
	}
	if want := spec.Header; want == whatsapp.HeaderImage || want == whatsapp.HeaderVideo {
		if header == nil {
			return errMissingValue("header: Parameter of type " + string(want) + " is missing")
		}
		if header.Parameters[0].Type != string(want) {
			return errFormat("header: Format mismatch, expected " + string(want) + ", received " + header.Parameters[0].Type)
		}
	} else {
		wantN := 0
		if want == whatsapp.HeaderText {
			wantN = 1
		}
		gotN := 0
		if header != nil {
			gotN = len(header.Parameters)
			if header.Parameters[0].Type != "text" {
				return errFormat("header: Format mismatch, expected text, received " + header.Parameters[0].Type)
			}
		}
		if gotN != wantN {
			return errParamCount(fmt.Sprintf("header: number of localizable_params (%d) does not match the expected number of params (%d)", gotN, wantN))
		}
	}
	if body != spec.BodyParameters {
		return errParamCount(fmt.Sprintf("body: number of localizable_params (%d) does not match the expected number of params (%d)", body, spec.BodyParameters))
	}
	if buttons != spec.URLButtons {
		return errParamCount("buttons: " + strconv.Itoa(buttons) + " url button parameters given, the template has " + strconv.Itoa(spec.URLButtons))
	}
	return nil
}
