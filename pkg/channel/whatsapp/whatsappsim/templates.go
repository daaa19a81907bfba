package whatsappsim

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

// Templates come two ways. PUT /_sim/templates/{name}/{language} (SetTemplate)
// registers an APPROVED template for every account, as before: its shape
// only. POST /{version}/{waba_id}/message_templates (CreateTemplate) creates
// one in a WhatsApp Business Account as Meta does: PENDING, then APPROVED or
// REJECTED after the rules' review delay, then its quality, category and
// pauses change through the admin API, each change announced by its webhook.
// While no template is registered at all, the simulator accepts any name.
//
// A send is held against the template its number's account has under that
// name and language (or, failing that, the one registered for every
// account): 132001 when there is none or it is not APPROVED yet (PENDING,
// REJECTED), 132015 while it is PAUSED, 132016 once it is DISABLED, then
// 132000 and 132012 for parameters that do not fit.

// Meta's pauses ("Template pausing"): 3 hours the first time, 6 the
// second, disabled the third. Scaled by Rules.TimeScale.
const (
	FirstPause  = 3 * time.Hour
	SecondPause = 6 * time.Hour
	// PausesToDisable is the pause that disables instead.
	PausesToDisable = 3
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
	// Category is MARKETING (the default), UTILITY or AUTHENTICATION.
	Category string `json:"category,omitempty"`
}

// Template sources (TemplateState.Source).
const (
	// SourceAdmin is a template registered with PUT /_sim/templates.
	SourceAdmin = "admin"
	// SourceGraph is one created with POST /{version}/{waba_id}/message_templates.
	SourceGraph = "graph"
)

// TemplateState is a template and where it is in its lifecycle, as
// GET /_sim/templates shows it.
type TemplateState struct {
	ID string `json:"id"`
	// WABAID is the WhatsApp Business Account the template belongs to;
	// empty for one registered with PUT /_sim/templates, which every
	// account may send.
	WABAID   string `json:"waba_id,omitempty"`
	Name     string `json:"name"`
	Language string `json:"language"`
	Source   string `json:"source"`
	// Category is MARKETING, UTILITY or AUTHENTICATION.
	Category string `json:"category"`
	// Status is PENDING, APPROVED, REJECTED, PAUSED or DISABLED.
	Status string `json:"status"`
	// Reason is a rejection's reason.
	Reason string `json:"reason,omitempty"`
	// Quality is UNKNOWN (pending), GREEN, YELLOW or RED.
	Quality string `json:"quality"`
	// PauseCount is how often the template was paused; the third pause
	// disables it (and counts).
	PauseCount int `json:"pause_count"`
	// PausedUntil is when a PAUSED template is APPROVED again by itself.
	PausedUntil *time.Time `json:"paused_until,omitempty"`
	// Header, BodyParameters and URLButtons are what a send must carry.
	Header         whatsapp.HeaderKind `json:"header"`
	BodyParameters int                 `json:"body_parameters"`
	URLButtons     int                 `json:"url_buttons"`
	CreatedAt      time.Time           `json:"created_at"`
	UpdatedAt      time.Time           `json:"updated_at"`
}

// Errors of the template lifecycle.
var (
	ErrUnknownTemplate = errors.New("whatsappsim: no such template")
	// ErrTemplateState is a change that does not apply to the template's
	// status (pausing a PENDING template, reviewing an APPROVED one, ...).
	ErrTemplateState = errors.New("whatsappsim: not possible in the template's status")
	ErrBadTemplate   = errors.New("whatsappsim: bad template")
)

// tmpl is one template: its identity, and its state, replaced whole on
// each change (under Sim.tplMu) so that sends read it without a lock.
type tmpl struct {
	id      string
	idNum   int64
	waba    string
	name    string
	lang    string
	source  string
	created time.Time
	state   atomic.Pointer[tmplState]
	// timer and gen are the pending review or end of pause, under tplMu:
	// a timer that fires with a stale gen does nothing.
	timer *time.Timer
	gen   uint64
}

type tmplState struct {
	spec        TemplateSpec
	def         *whatsapp.TemplateDefinition // graph templates only
	category    string
	status      string
	reason      string
	quality     string
	qualityAt   time.Time
	pauses      int
	pausedUntil time.Time
	updated     time.Time
}

func templateKey(waba, name, lang string) string { return waba + "\x00" + name + "\x00" + lang }

func (t *tmpl) view() TemplateState {
	st := t.state.Load()
	v := TemplateState{
		ID: t.id, WABAID: t.waba, Name: t.name, Language: t.lang, Source: t.source,
		Category: st.category, Status: st.status, Reason: st.reason, Quality: st.quality,
		PauseCount: st.pauses, Header: st.spec.Header, BodyParameters: st.spec.BodyParameters,
		URLButtons: st.spec.URLButtons, CreatedAt: t.created, UpdatedAt: st.updated,
	}
	if st.status == whatsapp.TemplatePaused {
		until := st.pausedUntil
		v.PausedUntil = &until
	}
	return v
}

// checkSpec validates a template's send shape and fills its defaults.
func checkSpec(t *TemplateSpec) error {
	switch {
	case t.Name == "" || t.Language == "":
		return fmt.Errorf("%w: a template needs a name and a language", ErrBadTemplate)
	case t.BodyParameters < 0 || t.URLButtons < 0 || t.URLButtons > 2:
		return fmt.Errorf("%w: template %s: body_parameters >= 0, url_buttons 0..2", ErrBadTemplate, t.Name)
	}
	switch t.Header {
	case "":
		t.Header = whatsapp.HeaderNone
	case whatsapp.HeaderNone, whatsapp.HeaderText, whatsapp.HeaderImage, whatsapp.HeaderVideo:
	default:
		return fmt.Errorf("%w: template %s: header is none, text, image or video", ErrBadTemplate, t.Name)
	}
	switch t.Category {
	case "":
		t.Category = whatsapp.CategoryMarketing
	case whatsapp.CategoryMarketing, whatsapp.CategoryUtility, whatsapp.CategoryAuthentication:
	default:
		return fmt.Errorf("%w: template %s: category is MARKETING, UTILITY or AUTHENTICATION", ErrBadTemplate, t.Name)
	}
	return nil
}

// SetTemplate registers (or replaces the shape of) an APPROVED template
// that every account may send. A replaced template keeps its id and
// lifecycle (status, quality, pauses); its category changes only when t
// names one.
func (s *Sim) SetTemplate(t TemplateSpec) error {
	named := t.Category != ""
	if err := checkSpec(&t); err != nil {
		return err
	}
	now := time.Now()
	s.tplMu.Lock()
	defer s.tplMu.Unlock()
	key := templateKey("", t.Name, t.Language)
	if old := (*s.templates.Load())[key]; old != nil {
		st := *old.state.Load()
		st.spec, st.updated = t, now
		if named {
			st.category = t.Category
		}
		old.state.Store(&st)
		return nil
	}
	n := &tmpl{waba: "", name: t.Name, lang: t.Language, source: SourceAdmin, created: now}
	n.idNum = s.tplIDs.Add(1)
	n.id = strconv.FormatInt(n.idNum, 10)
	n.state.Store(&tmplState{spec: t, category: t.Category, status: whatsapp.TemplateApproved, quality: whatsapp.QualityUnknown, updated: now})
	s.putTemplate(key, n)
	return nil
}

// putTemplate adds a template to the copy-on-write map; tplMu is held.
func (s *Sim) putTemplate(key string, t *tmpl) {
	old := *s.templates.Load()
	next := make(map[string]*tmpl, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[key] = t
	s.templates.Store(&next)
}

// removeTemplate drops a template and its timer; tplMu is held.
func (s *Sim) removeTemplate(key string) bool {
	old := *s.templates.Load()
	t, ok := old[key]
	if !ok {
		return false
	}
	if t.timer != nil {
		t.timer.Stop()
	}
	t.gen++
	next := make(map[string]*tmpl, len(old))
	for k, v := range old {
		if k != key {
			next[k] = v
		}
	}
	s.templates.Store(&next)
	return true
}

// RemoveTemplate unregisters a template registered with SetTemplate; it
// reports whether it was there.
func (s *Sim) RemoveTemplate(name, lang string) bool {
	s.tplMu.Lock()
	defer s.tplMu.Unlock()
	return s.removeTemplate(templateKey("", name, lang))
}

// RemoveTemplateByID removes any template; it reports whether it was there.
func (s *Sim) RemoveTemplateByID(id string) bool {
	s.tplMu.Lock()
	defer s.tplMu.Unlock()
	for k, t := range *s.templates.Load() {
		if t.id == id {
			return s.removeTemplate(k)
		}
	}
	return false
}

// Templates lists the send shapes of every template (of both kinds).
func (s *Sim) Templates() []TemplateSpec {
	states := s.TemplateStates()
	out := make([]TemplateSpec, len(states))
	for i, t := range states {
		out[i] = TemplateSpec{Name: t.Name, Language: t.Language, Header: t.Header, BodyParameters: t.BodyParameters, URLButtons: t.URLButtons, Category: t.Category}
	}
	return out
}

// TemplateStates lists every template with its lifecycle, by name,
// language and account.
func (s *Sim) TemplateStates() []TemplateState {
	m := *s.templates.Load()
	out := make([]TemplateState, 0, len(m))
	for _, t := range m {
		out = append(out, t.view())
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if a.Language != b.Language {
			return a.Language < b.Language
		}
		return a.WABAID < b.WABAID
	})
	return out
}

// TemplateByID returns one template.
func (s *Sim) TemplateByID(id string) (TemplateState, bool) {
	if t := s.templateByID(id); t != nil {
		return t.view(), true
	}
	return TemplateState{}, false
}

// FindTemplate returns the template a number of WhatsApp Business Account
// wabaID sends under that name and language: the account's own, or the one
// registered for every account.
func (s *Sim) FindTemplate(wabaID, name, language string) (TemplateState, bool) {
	if t := s.lookupTemplate(*s.templates.Load(), wabaID, name, language); t != nil {
		return t.view(), true
	}
	return TemplateState{}, false
}

func (s *Sim) templateByID(id string) *tmpl {
	for _, t := range *s.templates.Load() {
		if t.id == id {
			return t
		}
	}
	return nil
}

func (s *Sim) lookupTemplate(reg map[string]*tmpl, waba, name, lang string) *tmpl {
	if t := reg[templateKey(waba, name, lang)]; t != nil {
		return t
	}
	return reg[templateKey("", name, lang)]
}

// errPaused and errDisabled are the Cloud API's answers for a paused or
// disabled template ("Error codes": 132015, 132016).
var (
	errTemplatePaused = &apiError{status: 400, code: 132015, typ: "OAuthException",
		message: "(#132015) Template is Paused", details: "Template is paused due to low quality so it cannot be sent in a template message."}
	errTemplateDisabled = &apiError{status: 400, code: 132016, typ: "OAuthException",
		message: "(#132016) Template is Disabled", details: "Template has been paused too many times due to low quality and is now permanently disabled."}
)

// checkTemplate holds a send against its template and returns the
// template's category (MARKETING while no template is registered).
func (s *Sim) checkTemplate(acc *account, m *whatsapp.TemplateMessage, now time.Time) (string, *apiError) {
	reg := *s.templates.Load()
	if len(reg) == 0 {
		return whatsapp.CategoryMarketing, nil
	}
	t := s.lookupTemplate(reg, acc.waba, m.Template.Name, m.Template.Language.Code)
	if t == nil {
		return "", errNoTemplate(m.Template.Name, m.Template.Language.Code)
	}
	st := t.state.Load()
	switch st.status {
	case whatsapp.TemplateApproved:
	case whatsapp.TemplatePaused:
		// The timer that ends the pause may lag: the pause's end is the rule.
		if now.Before(st.pausedUntil) {
			return "", errTemplatePaused
		}
	case whatsapp.TemplateDisabled:
		return "", errTemplateDisabled
	default: // PENDING, REJECTED: not approved, so not there for a send
		return "", errNoTemplate(m.Template.Name, m.Template.Language.Code)
	}
	return st.category, checkShape(&st.spec, m)
}

// checkShape holds a send's parameters against the template's.
func checkShape(spec *TemplateSpec, m *whatsapp.TemplateMessage) *apiError {
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

// The lifecycle. Every change runs under tplMu, replaces the template's
// state and queues its webhooks in the order they happened.

// change applies f to a copy of the template's state; f returns the
// webhooks to post, or an error that leaves the state as it was.
func (s *Sim) change(id string, f func(t *tmpl, st *tmplState, now time.Time) ([]accountChange, error)) (TemplateState, error) {
	s.tplMu.Lock()
	defer s.tplMu.Unlock()
	t := s.templateByID(id)
	if t == nil {
		return TemplateState{}, fmt.Errorf("%w: %s", ErrUnknownTemplate, id)
	}
	return s.changeLocked(t, f)
}

func (s *Sim) changeLocked(t *tmpl, f func(t *tmpl, st *tmplState, now time.Time) ([]accountChange, error)) (TemplateState, error) {
	now := time.Now()
	st := *t.state.Load()
	notes, err := f(t, &st, now)
	if err != nil {
		return TemplateState{}, err
	}
	st.updated = now
	t.state.Store(&st)
	s.notes.send(now, notes...)
	return t.view(), nil
}

// schedule runs f under tplMu after d, unless the template changes its
// pending event first (a new schedule, a removal); tplMu is held.
func (s *Sim) schedule(t *tmpl, d time.Duration, f func(t *tmpl, st *tmplState, now time.Time) ([]accountChange, error)) {
	if t.timer != nil {
		t.timer.Stop()
	}
	t.gen++
	gen := t.gen
	t.timer = time.AfterFunc(d, func() {
		select {
		case <-s.closing:
			return
		default:
		}
		s.tplMu.Lock()
		defer s.tplMu.Unlock()
		if t.gen != gen {
			return
		}
		t.timer = nil
		_, _ = s.changeLocked(t, f)
	})
}

// unschedule cancels the template's pending event; tplMu is held.
func (s *Sim) unschedule(t *tmpl) {
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	t.gen++
}

// stopTemplateTimers cancels every pending event (Close).
func (s *Sim) stopTemplateTimers() {
	s.tplMu.Lock()
	defer s.tplMu.Unlock()
	for _, t := range *s.templates.Load() {
		s.unschedule(t)
	}
}

// statusNotes is a message_template_status_update for every account the
// template belongs to (all of them for a template registered for every
// account).
func (s *Sim) statusNotes(t *tmpl, st *tmplState, other *whatsapp.TemplateOtherInfo, now time.Time) []accountChange {
	reason := "NONE"
	if st.status == whatsapp.TemplateRejected && st.reason != "" {
		reason = st.reason
	}
	v := whatsapp.TemplateStatusUpdate{
		Event: st.status, MessageTemplateID: t.idNum, MessageTemplateName: t.name,
		MessageTemplateLanguage: t.lang, Reason: reason, MessageTemplateCategory: st.category, OtherInfo: other,
	}
	if st.status == whatsapp.TemplateDisabled {
		v.DisableInfo = &whatsapp.TemplateDisableInfo{DisableDate: now.Unix()}
	}
	return s.notesFor(t, whatsapp.FieldTemplateStatus, v)
}

func (s *Sim) notesFor(t *tmpl, field string, v any) []accountChange {
	if t.waba != "" {
		return []accountChange{{waba: t.waba, field: field, value: v}}
	}
	var out []accountChange
	for _, w := range s.wabas() {
		out = append(out, accountChange{waba: w, field: field, value: v})
	}
	return out
}

// review decides a PENDING template; reason is a rejection's.
func (s *Sim) review(status, reason string) func(*tmpl, *tmplState, time.Time) ([]accountChange, error) {
	return func(t *tmpl, st *tmplState, now time.Time) ([]accountChange, error) {
		if st.status != whatsapp.TemplatePending {
			return nil, fmt.Errorf("%w: %s is %s, not PENDING", ErrTemplateState, t.id, st.status)
		}
		s.unschedule(t)
		st.status, st.reason = status, ""
		if status == whatsapp.TemplateRejected {
			st.reason = reason
		}
		return s.statusNotes(t, st, nil, now), nil
	}
}

// ReviewTemplate decides a PENDING template at once: status is APPROVED
// or REJECTED (with reason; empty takes the rules' reason).
func (s *Sim) ReviewTemplate(id, status, reason string) (TemplateState, error) {
	switch status {
	case whatsapp.TemplateApproved:
	case whatsapp.TemplateRejected:
		if reason == "" {
			reason = s.Rules().TemplateRejectReason
		}
	default:
		return TemplateState{}, fmt.Errorf("%w: review status is APPROVED or REJECTED", ErrBadTemplate)
	}
	return s.change(id, s.review(status, reason))
}

// pause is Meta's escalation: PAUSED for FirstPause, then SecondPause
// (scaled), DISABLED the third time.
func (s *Sim) pause(t *tmpl, st *tmplState, now time.Time) ([]accountChange, error) {
	if st.status != whatsapp.TemplateApproved {
		return nil, fmt.Errorf("%w: %s is %s, only an APPROVED template is paused", ErrTemplateState, t.id, st.status)
	}
	st.pauses++
	if st.pauses >= PausesToDisable {
		s.unschedule(t)
		st.status, st.pausedUntil = whatsapp.TemplateDisabled, time.Time{}
		return s.statusNotes(t, st, nil, now), nil
	}
	rules := s.Rules()
	d, title, hours := rules.scaled(FirstPause), "FIRST_PAUSE", 3
	if st.pauses == 2 {
		d, title, hours = rules.scaled(SecondPause), "SECOND_PAUSE", 6
	}
	st.status, st.pausedUntil = whatsapp.TemplatePaused, now.Add(d)
	s.schedule(t, d, s.endPause("UNPAUSE", "Your template's pause ended."))
	return s.statusNotes(t, st, &whatsapp.TemplateOtherInfo{
		Title:       title,
		Description: fmt.Sprintf("Your WhatsApp message template has been paused for %d hours until %s because it had issues.", hours, st.pausedUntil.UTC().Format(time.RFC3339)),
	}, now), nil
}

// endPause makes a PAUSED template APPROVED again.
func (s *Sim) endPause(title, description string) func(*tmpl, *tmplState, time.Time) ([]accountChange, error) {
	return func(t *tmpl, st *tmplState, now time.Time) ([]accountChange, error) {
		if st.status != whatsapp.TemplatePaused {
			return nil, fmt.Errorf("%w: %s is %s, not PAUSED", ErrTemplateState, t.id, st.status)
		}
		s.unschedule(t)
		st.status, st.pausedUntil = whatsapp.TemplateApproved, time.Time{}
		return s.statusNotes(t, st, &whatsapp.TemplateOtherInfo{Title: title, Description: description}, now), nil
	}
}

// PauseTemplate pauses an APPROVED template as Meta does for low quality:
// for 3 hours the first time, 6 the second (scaled by Rules.TimeScale;
// APPROVED again by itself at the end), DISABLED the third time.
func (s *Sim) PauseTemplate(id string) (TemplateState, error) { return s.change(id, s.pause) }

// UnpauseTemplate ends a pause at once (APPROVED); the pause still counts
// towards the third, which disables.
func (s *Sim) UnpauseTemplate(id string) (TemplateState, error) {
	return s.change(id, s.endPause("UNPAUSE", "Your template's pause was lifted."))
}

// SetTemplateQuality sets a template's quality score (GREEN, YELLOW, RED,
// UNKNOWN), announced by message_template_quality_update. RED pauses an
// APPROVED template when Rules.PauseOnRedQuality says so (announced after
// the quality). Setting the score it has changes nothing.
func (s *Sim) SetTemplateQuality(id, quality string) (TemplateState, error) {
	switch quality {
	case whatsapp.QualityGreen, whatsapp.QualityYellow, whatsapp.QualityRed, whatsapp.QualityUnknown:
	default:
		return TemplateState{}, fmt.Errorf("%w: quality is GREEN, YELLOW, RED or UNKNOWN", ErrBadTemplate)
	}
	return s.change(id, func(t *tmpl, st *tmplState, now time.Time) ([]accountChange, error) {
		if st.quality == quality {
			return nil, nil
		}
		prev := st.quality
		st.quality, st.qualityAt = quality, now
		notes := s.notesFor(t, whatsapp.FieldTemplateQuality, whatsapp.TemplateQualityUpdate{
			PreviousQualityScore: prev, NewQualityScore: quality, MessageTemplateID: t.idNum,
			MessageTemplateName: t.name, MessageTemplateLanguage: t.lang,
		})
		if quality == whatsapp.QualityRed && s.Rules().PauseOnRedQuality && st.status == whatsapp.TemplateApproved {
			more, err := s.pause(t, st, now)
			if err != nil {
				return nil, err
			}
			notes = append(notes, more...)
		}
		return notes, nil
	})
}

// SetTemplateCategory re-categorises a template (Meta may move UTILITY to
// MARKETING), announced by template_category_update. Setting the category
// it has changes nothing.
func (s *Sim) SetTemplateCategory(id, category string) (TemplateState, error) {
	switch category {
	case whatsapp.CategoryMarketing, whatsapp.CategoryUtility, whatsapp.CategoryAuthentication:
	default:
		return TemplateState{}, fmt.Errorf("%w: category is MARKETING, UTILITY or AUTHENTICATION", ErrBadTemplate)
	}
	return s.change(id, func(t *tmpl, st *tmplState, _ time.Time) ([]accountChange, error) {
		if st.category == category {
			return nil, nil
		}
		prev := st.category
		st.category = category
		st.spec.Category = category
		return s.notesFor(t, whatsapp.FieldTemplateCategory, whatsapp.TemplateCategoryUpdate{
			MessageTemplateID: t.idNum, MessageTemplateName: t.name, MessageTemplateLanguage: t.lang,
			PreviousCategory: prev, NewCategory: category,
		}), nil
	})
}

// categoryPricing is how the statuses bill a template's category.
func categoryPricing(category string) string {
	if category == "" {
		return "marketing"
	}
	return strings.ToLower(category)
}
