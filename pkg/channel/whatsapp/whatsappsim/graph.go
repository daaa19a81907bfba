package whatsappsim

import (
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

// Template management in the Graph API's shape (Meta, "Message Templates
// API": POST and GET /{version}/{waba_id}/message_templates), with the
// Bearer token of any number of that WhatsApp Business Account.

// Limits Meta documents for a template's definition ("Templates":
// components and their limits).
const (
	maxTemplateName   = 512
	maxBodyText       = 1024
	maxHeaderText     = 60
	maxFooterText     = 60
	maxButtons        = 10
	maxURLButtons     = 2
	maxTemplateDefLen = 256 << 10
)

var (
	templateNameRE = regexp.MustCompile(`^[a-z0-9_]+$`)
	languageRE     = regexp.MustCompile(`^[a-z]{2,3}(_[A-Z]{2})?$`)
	placeholderRE  = regexp.MustCompile(`\{\{\s*([A-Za-z0-9_]+)\s*\}\}`)
)

// errTemplateExists is Meta's answer to a second template of one name and
// language in a WhatsApp Business Account.
func errTemplateExists(name, lang string) *apiError {
	return &apiError{status: 400, code: 100, subcode: 2388024, typ: "OAuthException",
		message: "Invalid parameter", details: "Content in this language already exists: template " + name + " in " + lang}
}

// placeholders are the distinct {{…}} of a text, in order.
func placeholders(text string) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range placeholderRE.FindAllStringSubmatch(text, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			out = append(out, m[1])
		}
	}
	return out
}

// specOf checks a definition as Meta does and derives what a send of it
// must carry. The simulator serves the header formats it can check a send
// against (TEXT, IMAGE, VIDEO).
func specOf(d *whatsapp.TemplateDefinition) (TemplateSpec, *apiError) {
	bad := func(details string) (TemplateSpec, *apiError) {
		return TemplateSpec{}, errParam("(#100) Invalid parameter", details)
	}
	switch {
	case d.Name == "":
		return TemplateSpec{}, errRequired("name")
	case d.Language == "":
		return TemplateSpec{}, errRequired("language")
	case d.Category == "":
		return TemplateSpec{}, errRequired("category")
	case len(d.Components) == 0:
		return TemplateSpec{}, errRequired("components")
	case len(d.Name) > maxTemplateName || !templateNameRE.MatchString(d.Name):
		return bad("name: lowercase letters, digits and underscores, at most 512 characters")
	case !languageRE.MatchString(d.Language):
		return bad("language: a language code such as en or en_US")
	}
	spec := TemplateSpec{Name: d.Name, Language: d.Language, Header: whatsapp.HeaderNone, Category: strings.ToUpper(d.Category)}
	switch spec.Category {
	case whatsapp.CategoryMarketing, whatsapp.CategoryUtility, whatsapp.CategoryAuthentication:
	default:
		return bad("Param category must be one of {AUTHENTICATION, MARKETING, UTILITY} - got \"" + d.Category + "\".")
	}
	switch d.ParameterFormat {
	case "", "POSITIONAL", "NAMED":
	default:
		return bad("parameter_format: POSITIONAL or NAMED")
	}
	seen := map[string]bool{}
	for i, c := range d.Components {
		where := "components[" + strconv.Itoa(i) + "]"
		typ := strings.ToUpper(c.Type)
		if seen[typ] {
			return bad(where + ": a template has at most one " + typ)
		}
		seen[typ] = true
		switch typ {
		case "HEADER":
			switch strings.ToUpper(c.Format) {
			case "TEXT":
				ph := placeholders(c.Text)
				switch {
				case c.Text == "" || utf8.RuneCountInString(c.Text) > maxHeaderText:
					return bad(where + ": a TEXT header has 1 to 60 characters")
				case len(ph) > 1:
					return bad(where + ": a header has at most one variable")
				case len(ph) == 1:
					spec.Header = whatsapp.HeaderText
				}
			case "IMAGE":
				spec.Header = whatsapp.HeaderImage
			case "VIDEO":
				spec.Header = whatsapp.HeaderVideo
			case "DOCUMENT", "LOCATION":
				return bad(where + ": the simulator serves header formats TEXT, IMAGE and VIDEO")
			default:
				return bad(where + ": format must be TEXT, IMAGE, VIDEO, DOCUMENT or LOCATION")
			}
		case "BODY":
			if spec.Category == whatsapp.CategoryAuthentication {
				// Meta writes an authentication template's body; a send
				// carries the code as its one body parameter.
				spec.BodyParameters = 1
				continue
			}
			if c.Text == "" || utf8.RuneCountInString(c.Text) > maxBodyText {
				return bad(where + ": a BODY has 1 to 1024 characters")
			}
			ph := placeholders(c.Text)
			if d.ParameterFormat != "NAMED" {
				for n, p := range ph {
					if p != strconv.Itoa(n+1) {
						return bad(where + ": positional variables are {{1}}, {{2}}, ... in order")
					}
				}
			}
			spec.BodyParameters = len(ph)
		case "FOOTER":
			if spec.Category != whatsapp.CategoryAuthentication && (c.Text == "" || utf8.RuneCountInString(c.Text) > maxFooterText) {
				return bad(where + ": a FOOTER has 1 to 60 characters")
			}
		case "BUTTONS":
			if len(c.Buttons) == 0 || len(c.Buttons) > maxButtons {
				return bad(where + ": 1 to 10 buttons")
			}
			urls := 0
			for j, b := range c.Buttons {
				bw := where + ".buttons[" + strconv.Itoa(j) + "]"
				switch strings.ToUpper(b.Type) {
				case "URL":
					urls++
					if b.URL == "" || !strings.HasPrefix(b.URL, "https://") && !strings.HasPrefix(b.URL, "http://") {
						return bad(bw + ": a URL button needs an http(s) url")
					}
					if len(placeholders(b.URL)) > 0 {
						if !strings.HasSuffix(b.URL, "{{1}}") {
							return bad(bw + ": a dynamic URL ends in {{1}}")
						}
						spec.URLButtons++
					}
				case "OTP":
					// A copy-code or one-tap authentication button takes the
					// code as a url button parameter in the send.
					spec.URLButtons++
				case "QUICK_REPLY", "PHONE_NUMBER", "COPY_CODE", "FLOW", "CATALOG", "MPM":
				default:
					return bad(bw + ": type must be QUICK_REPLY, URL, PHONE_NUMBER, COPY_CODE, OTP or FLOW")
				}
			}
			if urls > maxURLButtons {
				return bad(where + ": at most 2 URL buttons")
			}
		default:
			return bad(where + ": type must be HEADER, BODY, FOOTER or BUTTONS")
		}
	}
	if !seen["BODY"] {
		return bad("components: a template has a BODY")
	}
	if spec.URLButtons > maxURLButtons {
		return bad("components: at most 2 buttons with a variable")
	}
	return spec, nil
}

// CreateTemplate creates a template in a WhatsApp Business Account, as
// POST /{version}/{waba_id}/message_templates does: PENDING, then decided
// after Rules.TemplateReviewDelay (REJECTED when its name matches
// Rules.RejectTemplatesMatching, else APPROVED) with its webhook.
func (s *Sim) CreateTemplate(wabaID string, d whatsapp.TemplateDefinition) (TemplateState, error) {
	if !s.servesWABA(wabaID) {
		return TemplateState{}, fmt.Errorf("%w: waba %s", ErrUnknownAccount, wabaID)
	}
	t, apiErr := s.createTemplate(wabaID, d)
	if apiErr != nil {
		return TemplateState{}, fmt.Errorf("%w: %s", ErrBadTemplate, apiErr.details)
	}
	return t, nil
}

func (s *Sim) createTemplate(waba string, d whatsapp.TemplateDefinition) (TemplateState, *apiError) {
	spec, apiErr := specOf(&d)
	if apiErr != nil {
		return TemplateState{}, apiErr
	}
	d.Category = spec.Category
	now := time.Now()
	rules := s.rules.Load()
	s.tplMu.Lock()
	defer s.tplMu.Unlock()
	key := templateKey(waba, d.Name, d.Language)
	if (*s.templates.Load())[key] != nil {
		return TemplateState{}, errTemplateExists(d.Name, d.Language)
	}
	t := &tmpl{waba: waba, name: d.Name, lang: d.Language, source: SourceGraph, created: now}
	t.idNum = s.tplIDs.Add(1)
	t.id = strconv.FormatInt(t.idNum, 10)
	def := d
	t.state.Store(&tmplState{spec: spec, def: &def, category: spec.Category, status: whatsapp.TemplatePending, quality: whatsapp.QualityUnknown, updated: now})
	s.putTemplate(key, t)
	status, reason := whatsapp.TemplateApproved, ""
	if rules.reject != nil && rules.reject.MatchString(d.Name) {
		status, reason = whatsapp.TemplateRejected, rules.TemplateRejectReason
	}
	s.schedule(t, rules.TemplateReviewDelay, s.review(status, reason))
	return t.view(), nil
}

func (s *Sim) servesWABA(waba string) bool {
	for _, a := range *s.accounts.Load() {
		if a.waba == waba {
			return true
		}
	}
	return false
}

// authWABA checks the path's version and the Bearer token of a number of
// the WhatsApp Business Account.
func (s *Sim) authWABA(r *http.Request) (string, *apiError) {
	if v := r.PathValue("version"); len(v) < 2 || v[0] != 'v' {
		return "", errParam("(#100) Unknown path components: /"+v, "the path is /{version}/{waba_id}/message_templates, version like v21.0")
	}
	waba := r.PathValue("waba_id")
	auth := []byte(r.Header.Get("Authorization"))
	known := false
	for _, a := range *s.accounts.Load() {
		if a.waba != waba {
			continue
		}
		known = true
		if subtle.ConstantTimeCompare(auth, []byte(a.bearer)) == 1 {
			return waba, nil
		}
	}
	if !known {
		return "", errUnknownObject(waba)
	}
	return "", errToken
}

// handleCreateTemplate is POST /{version}/{waba_id}/message_templates.
func (s *Sim) handleCreateTemplate(w http.ResponseWriter, r *http.Request) {
	waba, apiErr := s.authWABA(r)
	if apiErr != nil {
		s.writeError(w, apiErr)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxTemplateDefLen+1))
	if err != nil {
		return
	}
	if len(body) > maxTemplateDefLen {
		s.writeError(w, errParam("(#100) Invalid parameter", "Request body is too large"))
		return
	}
	var d whatsapp.TemplateDefinition
	if err := json.Unmarshal(body, &d); err != nil {
		s.writeError(w, decodeError(err))
		return
	}
	t, apiErr := s.createTemplate(waba, d)
	if apiErr != nil {
		s.writeError(w, apiErr)
		return
	}
	writeJSON(w, http.StatusOK, whatsapp.TemplateCreated{ID: t.ID, Status: t.Status, Category: t.Category})
}

// graphTemplate is a template as the Graph API lists it.
func graphTemplate(t *tmpl) whatsapp.MessageTemplate {
	st := t.state.Load()
	m := whatsapp.MessageTemplate{
		ID: t.id, Name: t.name, Language: t.lang, Status: st.status, Category: st.category,
		QualityScore: &whatsapp.TemplateQualityScore{Score: st.quality},
	}
	if !st.qualityAt.IsZero() {
		m.QualityScore.Date = st.qualityAt.Unix()
	}
	if st.status == whatsapp.TemplateRejected {
		m.RejectedReason = st.reason
	}
	if st.def != nil {
		m.ParameterFormat = st.def.ParameterFormat
		m.Components = st.def.Components
	} else {
		m.Components = componentsOf(st.spec)
	}
	if m.ParameterFormat == "" {
		m.ParameterFormat = "POSITIONAL"
	}
	return m
}

// componentsOf writes a PUT template's shape as components (placeholder
// text only: the simulator never knew its words).
func componentsOf(spec TemplateSpec) []whatsapp.TemplateComponent {
	var out []whatsapp.TemplateComponent
	switch spec.Header {
	case whatsapp.HeaderText:
		out = append(out, whatsapp.TemplateComponent{Type: "HEADER", Format: "TEXT", Text: "{{1}}"})
	case whatsapp.HeaderImage, whatsapp.HeaderVideo:
		out = append(out, whatsapp.TemplateComponent{Type: "HEADER", Format: strings.ToUpper(string(spec.Header))})
	}
	vars := make([]string, spec.BodyParameters)
	for i := range vars {
		vars[i] = "{{" + strconv.Itoa(i+1) + "}}"
	}
	body := strings.Join(vars, " ")
	if body == "" {
		body = spec.Name
	}
	out = append(out, whatsapp.TemplateComponent{Type: "BODY", Text: body})
	if spec.URLButtons > 0 {
		c := whatsapp.TemplateComponent{Type: "BUTTONS"}
		for i := range spec.URLButtons {
			c.Buttons = append(c.Buttons, whatsapp.TemplateButton{Type: "URL", Text: "Open " + strconv.Itoa(i+1), URL: "https://example.invalid/{{1}}"})
		}
		out = append(out, c)
	}
	return out
}

// Paging of the template list.
const (
	defaultTemplatePage = 25
	maxTemplatePage     = 1000
)

func cursorOf(id string) string { return base64.RawURLEncoding.EncodeToString([]byte(id)) }

func cursorID(c string) (int64, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	return n, err == nil
}

// handleListTemplates is GET /{version}/{waba_id}/message_templates: the
// account's templates and those registered for every account, newest
// first, filtered by name (contained in the name, as Meta's search does),
// status, category and language, in pages of limit (default 25) with the
// Graph API's cursors (after, before) and next/previous links.
func (s *Sim) handleListTemplates(w http.ResponseWriter, r *http.Request) {
	waba, apiErr := s.authWABA(r)
	if apiErr != nil {
		s.writeError(w, apiErr)
		return
	}
	q := r.URL.Query()
	limit := defaultTemplatePage
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			s.writeError(w, errParam("(#100) Param limit must be a positive integer", "limit: a positive integer"))
			return
		}
		limit = min(n, maxTemplatePage)
	}
	var after, before int64
	var ok bool
	if c := q.Get("after"); c != "" {
		if after, ok = cursorID(c); !ok {
			s.writeError(w, errParam("(#100) Invalid parameter", "after: not a cursor of this list"))
			return
		}
	}
	if c := q.Get("before"); c != "" {
		if before, ok = cursorID(c); !ok {
			s.writeError(w, errParam("(#100) Invalid parameter", "before: not a cursor of this list"))
			return
		}
	}
	statuses := map[string]bool{}
	for _, v := range strings.Split(q.Get("status"), ",") {
		if v = strings.TrimSpace(strings.ToUpper(v)); v != "" {
			statuses[v] = true
		}
	}
	name, category, language := q.Get("name"), strings.ToUpper(q.Get("category")), q.Get("language")

	var all []*tmpl
	for _, t := range *s.templates.Load() {
		if t.waba != waba && t.waba != "" {
			continue
		}
		st := t.state.Load()
		if (name != "" && !strings.Contains(t.name, name)) || (len(statuses) > 0 && !statuses[st.status]) ||
			(category != "" && st.category != category) || (language != "" && t.lang != language) {
			continue
		}
		all = append(all, t)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].idNum > all[j].idNum })
	var start, end int
	switch {
	case after != 0:
		start = sort.Search(len(all), func(i int) bool { return all[i].idNum < after })
		end = min(start+limit, len(all))
	case before != 0:
		end = sort.Search(len(all), func(i int) bool { return all[i].idNum <= before })
		start = max(end-limit, 0)
	default:
		end = min(limit, len(all))
	}
	page := whatsapp.TemplateList{Data: make([]whatsapp.MessageTemplate, 0, end-start)}
	for _, t := range all[start:end] {
		page.Data = append(page.Data, graphTemplate(t))
	}
	if len(page.Data) > 0 {
		paging := &whatsapp.GraphPaging{Cursors: whatsapp.GraphCursors{
			Before: cursorOf(page.Data[0].ID), After: cursorOf(page.Data[len(page.Data)-1].ID),
		}}
		link := func(param, cursor string) string {
			lq := url.Values{}
			for k, v := range q {
				if k != "after" && k != "before" {
					lq[k] = v
				}
			}
			lq.Set("limit", strconv.Itoa(limit))
			lq.Set(param, cursor)
			scheme := "http"
			if r.TLS != nil {
				scheme = "https"
			}
			return scheme + "://" + r.Host + r.URL.Path + "?" + lq.Encode()
		}
		if end < len(all) {
			paging.Next = link("after", paging.Cursors.After)
		}
		if start > 0 {
			paging.Previous = link("before", paging.Cursors.Before)
		}
		page.Paging = paging
	}
	writeJSON(w, http.StatusOK, page)
}

// The admin endpoints of the lifecycle: /_sim/templates/{id}/...

func (s *Sim) lifecycleAnswer(w http.ResponseWriter, t TemplateState, err error) {
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, t)
	case errors.Is(err, ErrUnknownTemplate):
		writeDetail(w, http.StatusNotFound, err.Error())
	case errors.Is(err, ErrTemplateState):
		writeDetail(w, http.StatusConflict, err.Error())
	default:
		writeDetail(w, http.StatusBadRequest, err.Error())
	}
}

func (s *Sim) handleReviewTemplate(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Status string `json:"status"`
		Reason string `json:"reason"`
	}
	if err := decodeStrict(r, &body); err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	t, err := s.ReviewTemplate(r.PathValue("id"), body.Status, body.Reason)
	s.lifecycleAnswer(w, t, err)
}

func (s *Sim) handleTemplateQuality(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Quality string `json:"quality"`
	}
	if err := decodeStrict(r, &body); err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	t, err := s.SetTemplateQuality(r.PathValue("id"), body.Quality)
	s.lifecycleAnswer(w, t, err)
}

func (s *Sim) handleTemplateCategory(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Category string `json:"category"`
	}
	if err := decodeStrict(r, &body); err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	t, err := s.SetTemplateCategory(r.PathValue("id"), body.Category)
	s.lifecycleAnswer(w, t, err)
}
