package whatsappsim

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"time"
)

// Rules are the Cloud API's policies the simulator enforces; they can
// change while it runs (GET and PATCH /_sim/rules). Each names the Meta
// document it follows. The zero value of every field added after the
// service window keeps the simulator as lenient as before, so that a
// caller that builds Rules by hand changes nothing it does not name.
type Rules struct {
	// ServiceWindow is how long a user's message lets the business send
	// session messages (Meta, "Customer service windows": 24 hours).
	ServiceWindow time.Duration
	// EnforceServiceWindow refuses session messages to users whose window
	// is closed or was never opened (131047). Templates are allowed at any
	// time.
	EnforceServiceWindow bool
	// ServiceWindowError is how the refusal comes: WindowErrorStatus (the
	// Cloud API's way) or WindowErrorSync.
	ServiceWindowError string

	// TimeScale multiplies Meta's long durations: a template's pauses (3
	// and 6 hours), the moving 24 hours of the messaging limit and the day
	// of the per-user marketing limit (131049), so that a test sees them in
	// seconds (0.0001 makes 3 hours about a second). 0 is 1.
	TimeScale float64
	// TemplateReviewDelay is how long a template created through
	// POST /{version}/{waba_id}/message_templates stays PENDING before it
	// is APPROVED or REJECTED (Meta reviews within minutes to a day; not
	// scaled).
	TemplateReviewDelay time.Duration
	// RejectTemplatesMatching is an RE2 expression: a created template
	// whose name matches it is REJECTED with TemplateRejectReason instead
	// of APPROVED. Empty rejects none.
	RejectTemplatesMatching string
	// TemplateRejectReason is the rejection's reason (Meta's values:
	// ABUSIVE_CONTENT, INCORRECT_CATEGORY, INVALID_FORMAT, SCAM); "" is
	// INVALID_FORMAT.
	TemplateRejectReason string
	// PauseOnRedQuality pauses an APPROVED template when its quality is
	// set RED, as Meta does for a template at the lowest quality ("Template
	// pausing": 3 hours, then 6, then disabled).
	PauseOnRedQuality bool
	// PairRateInterval is the shortest gap between two accepted sends from
	// one number to one user; a closer one gets 131056 (Meta,
	// "Throughput": about one message every 6 seconds). 0 is off.
	PairRateInterval time.Duration
	// MessagingLimitError is how a template send past the portfolio's
	// messaging limit is refused: MessagingLimitStatus (accepted, then a
	// failed status) or MessagingLimitSync (answered 400); "" is status.
	MessagingLimitError string
	// MessagingLimitCode is the error code of that refusal; 0 is 131049.
	// Meta documents no code for it (see the README).
	MessagingLimitCode int
	// MarketingLimitShare is the share (0..1) of users whose MARKETING
	// template sends fail with 131049, decided per (user, scaled day) so
	// that a resend within 24 hours fails again (Meta, "Per-user marketing
	// template message limits"). 0 is off.
	MarketingLimitShare float64
}

// Messaging limit refusal modes (Rules.MessagingLimitError).
const (
	MessagingLimitStatus = "status"
	MessagingLimitSync   = "sync"
)

// Meta's defaults of the rules that are on unless a test turns them off.
const (
	DefaultTemplateReviewDelay  = time.Second
	DefaultTemplateRejectReason = "INVALID_FORMAT"
	// codeMarketingLimit is Meta's 131049, "not delivered to maintain
	// healthy ecosystem engagement".
	codeMarketingLimit = 131049
)

// DefaultRules are Meta's: a 24-hour window, enforced, failing by status;
// templates reviewed in a second, none rejected; a RED template paused;
// real time. The rules that would slow or refuse today's load tests (pair
// rate, the per-user marketing limit) are off, and every portfolio's
// messaging limit is unlimited until a test sets a tier.
func DefaultRules() Rules {
	return Rules{
		ServiceWindow: DefaultServiceWindow, EnforceServiceWindow: true, ServiceWindowError: WindowErrorStatus,
		TimeScale: 1, TemplateReviewDelay: DefaultTemplateReviewDelay, TemplateRejectReason: DefaultTemplateRejectReason,
		PauseOnRedQuality: true, MessagingLimitError: MessagingLimitStatus, MessagingLimitCode: codeMarketingLimit,
	}
}

// withDefaults fills the fields whose zero value means "the default".
func (r Rules) withDefaults() Rules {
	if r.TimeScale == 0 {
		r.TimeScale = 1
	}
	if r.TemplateRejectReason == "" {
		r.TemplateRejectReason = DefaultTemplateRejectReason
	}
	if r.MessagingLimitError == "" {
		r.MessagingLimitError = MessagingLimitStatus
	}
	if r.MessagingLimitCode == 0 {
		r.MessagingLimitCode = codeMarketingLimit
	}
	return r
}

// Validate reports every problem with the rules.
func (r Rules) Validate() error {
	_, err := r.withDefaults().state()
	return err
}

// ruleState is Rules with the expression compiled.
type ruleState struct {
	Rules
	reject *regexp.Regexp
}

func (r Rules) state() (*ruleState, error) {
	var errs []error
	if r.ServiceWindow <= 0 {
		errs = append(errs, errors.New("service_window must be positive"))
	}
	if r.ServiceWindowError != WindowErrorStatus && r.ServiceWindowError != WindowErrorSync {
		errs = append(errs, fmt.Errorf("service_window_error %q: want %s or %s", r.ServiceWindowError, WindowErrorStatus, WindowErrorSync))
	}
	if r.TimeScale <= 0 || r.TimeScale > 1000 {
		errs = append(errs, errors.New("time_scale must be above 0 and at most 1000"))
	}
	if r.TemplateReviewDelay < 0 || r.PairRateInterval < 0 {
		errs = append(errs, errors.New("template_review_delay and pair_rate_interval must not be negative"))
	}
	st := &ruleState{Rules: r}
	if r.RejectTemplatesMatching != "" {
		re, err := regexp.Compile(r.RejectTemplatesMatching)
		if err != nil {
			errs = append(errs, fmt.Errorf("reject_templates_matching: %w", err))
		}
		st.reject = re
	}
	if len(r.TemplateRejectReason) > 256 {
		errs = append(errs, errors.New("template_reject_reason: at most 256 bytes"))
	}
	if r.MessagingLimitError != MessagingLimitStatus && r.MessagingLimitError != MessagingLimitSync {
		errs = append(errs, fmt.Errorf("messaging_limit_error %q: want %s or %s", r.MessagingLimitError, MessagingLimitStatus, MessagingLimitSync))
	}
	if r.MessagingLimitCode < 1 || r.MessagingLimitCode > 9_999_999 {
		errs = append(errs, errors.New("messaging_limit_code: a positive error code"))
	}
	if r.MarketingLimitShare < 0 || r.MarketingLimitShare > 1 {
		errs = append(errs, errors.New("marketing_limit_share is a share between 0 and 1"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("whatsappsim: rules: %w", err)
	}
	return st, nil
}

// scaled is one of Meta's long durations under TimeScale (never below a
// millisecond, so that a timer still orders events).
func (r *Rules) scaled(d time.Duration) time.Duration {
	return max(time.Duration(float64(d)*r.TimeScale), time.Millisecond)
}

// SetRules replaces the rules; zero fields take their defaults (see Rules).
func (s *Sim) SetRules(r Rules) error {
	st, err := r.withDefaults().state()
	if err != nil {
		return err
	}
	s.rules.Store(st)
	return nil
}

// Rules returns the rules in force.
func (s *Sim) Rules() Rules { return s.rules.Load().Rules }

type rulesView struct {
	ServiceWindow           string  `json:"service_window"`
	EnforceServiceWindow    bool    `json:"enforce_service_window"`
	ServiceWindowError      string  `json:"service_window_error"`
	TimeScale               float64 `json:"time_scale"`
	TemplateReviewDelay     string  `json:"template_review_delay"`
	RejectTemplatesMatching string  `json:"reject_templates_matching"`
	TemplateRejectReason    string  `json:"template_reject_reason"`
	PauseOnRedQuality       bool    `json:"pause_on_red_quality"`
	PairRateInterval        string  `json:"pair_rate_interval"`
	MessagingLimitError     string  `json:"messaging_limit_error"`
	MessagingLimitCode      int     `json:"messaging_limit_code"`
	MarketingLimitShare     float64 `json:"marketing_limit_share"`
}

func viewRules(r Rules) rulesView {
	return rulesView{
		ServiceWindow: r.ServiceWindow.String(), EnforceServiceWindow: r.EnforceServiceWindow, ServiceWindowError: r.ServiceWindowError,
		TimeScale: r.TimeScale, TemplateReviewDelay: r.TemplateReviewDelay.String(),
		RejectTemplatesMatching: r.RejectTemplatesMatching, TemplateRejectReason: r.TemplateRejectReason,
		PauseOnRedQuality: r.PauseOnRedQuality, PairRateInterval: r.PairRateInterval.String(),
		MessagingLimitError: r.MessagingLimitError, MessagingLimitCode: r.MessagingLimitCode,
		MarketingLimitShare: r.MarketingLimitShare,
	}
}

type rulesPatch struct {
	ServiceWindow           *string  `json:"service_window"`
	EnforceServiceWindow    *bool    `json:"enforce_service_window"`
	ServiceWindowError      *string  `json:"service_window_error"`
	TimeScale               *float64 `json:"time_scale"`
	TemplateReviewDelay     *string  `json:"template_review_delay"`
	RejectTemplatesMatching *string  `json:"reject_templates_matching"`
	TemplateRejectReason    *string  `json:"template_reject_reason"`
	PauseOnRedQuality       *bool    `json:"pause_on_red_quality"`
	PairRateInterval        *string  `json:"pair_rate_interval"`
	MessagingLimitError     *string  `json:"messaging_limit_error"`
	MessagingLimitCode      *int     `json:"messaging_limit_code"`
	MarketingLimitShare     *float64 `json:"marketing_limit_share"`
}

func (s *Sim) handlePatchRules(w http.ResponseWriter, r *http.Request) {
	var p rulesPatch
	if err := decodeStrict(r, &p); err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	rules := s.Rules()
	var errs []error
	duration := func(name string, v *string, into *time.Duration) {
		if v == nil {
			return
		}
		d, err := time.ParseDuration(*v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: a Go duration such as 24h, 6s or 90s, got %s", name, strconv.Quote(*v)))
			return
		}
		*into = d
	}
	duration("service_window", p.ServiceWindow, &rules.ServiceWindow)
	duration("template_review_delay", p.TemplateReviewDelay, &rules.TemplateReviewDelay)
	duration("pair_rate_interval", p.PairRateInterval, &rules.PairRateInterval)
	if err := errors.Join(errs...); err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	if p.EnforceServiceWindow != nil {
		rules.EnforceServiceWindow = *p.EnforceServiceWindow
	}
	set(&rules.ServiceWindowError, p.ServiceWindowError)
	if p.TimeScale != nil {
		if *p.TimeScale == 0 {
			writeDetail(w, http.StatusBadRequest, "time_scale must be above 0")
			return
		}
		rules.TimeScale = *p.TimeScale
	}
	set(&rules.RejectTemplatesMatching, p.RejectTemplatesMatching)
	set(&rules.TemplateRejectReason, p.TemplateRejectReason)
	if p.PauseOnRedQuality != nil {
		rules.PauseOnRedQuality = *p.PauseOnRedQuality
	}
	set(&rules.MessagingLimitError, p.MessagingLimitError)
	if p.MessagingLimitCode != nil {
		rules.MessagingLimitCode = *p.MessagingLimitCode
		if *p.MessagingLimitCode == 0 {
			rules.MessagingLimitCode = -1 // refused below: 0 is no code
		}
	}
	if p.MarketingLimitShare != nil {
		rules.MarketingLimitShare = *p.MarketingLimitShare
	}
	if err := s.SetRules(rules); err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, viewRules(s.Rules()))
}
