// Package whatsappsim is a stand-in for the WhatsApp Cloud API on loopback:
// the send endpoint (POST /{version}/{phone_number_id}/messages: template
// and session messages) in the real wire format, with per-number tokens and
// throughput, the 24-hour customer service window, switchable faults,
// signed status webhooks, inbound messages of every type played on demand,
// and inspection endpoints for tests and load tests. It is as strict as the
// Cloud API's documents where a rule says so (rules.go): template management
// (POST and GET /{version}/{waba_id}/message_templates) with the template
// lifecycle (PENDING, APPROVED or REJECTED, quality, category, pauses that
// escalate to DISABLED) and its webhooks, the business portfolio's
// messaging limit, the pair rate and the per-user marketing limit.
// provider-sim serves it as a process; tests in any module start it
// in-process:
//
//	sim, err := whatsappsim.New(whatsappsim.Config{Accounts: []whatsappsim.Account{{PhoneNumberID: "1001", Token: "t"}}})
//	srv := httptest.NewServer(sim)
//	defer srv.Close(); defer sim.Close()
//
// It lives in pkg, next to the client, rather than in provider-sim's
// internal/, because the dispatchers' end-to-end tests are other modules and
// Go forbids them to import another module's internal packages.
//
// Memory is bounded whatever the load: the received-message ring holds
// MessageBuffer entries, per-recipient counts and the pair limiter hold at
// most MaxRecipients numbers each, and the status callback queue holds at
// most Callbacks.QueueSize pending statuses (further ones are dropped and
// counted), the service windows and the users declined by the marketing
// limit at most MaxRecipients each, a portfolio's reached users at most its
// tier's limit, and the account webhook queue 4,096 webhooks.
package whatsappsim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Defaults of Config.
const (
	DefaultThroughput    = 80
	DefaultMessageBuffer = 10_000
	DefaultMaxRecipients = 200_000
	DefaultHangMax       = 2 * time.Minute
	DefaultQueueSize     = 100_000
	DefaultBatchSize     = 50
	DefaultWorkers       = 4
	DefaultCallbackWait  = 5 * time.Second
	DefaultMaxAttempts   = 3
)

// maxBody bounds a send's body; real template sends are a few hundred bytes.
const maxBody = 64 << 10

// Account is a phone number id the simulator serves, with its Bearer token.
type Account struct {
	PhoneNumberID string `json:"phone_number_id"`
	Token         string `json:"token,omitempty"`
	// ThroughputPerSecond is the number's send rate limit (130429 past it);
	// zero takes Config.Throughput.
	ThroughputPerSecond int `json:"throughput_per_second"`
	// WABAID is the WhatsApp Business Account the number belongs to: its
	// templates (/{version}/{waba_id}/message_templates, where the token
	// of any of its numbers is accepted) and the entry id of its webhooks.
	// Empty takes the phone number id: each number its own account, as
	// the status webhooks always named it.
	WABAID string `json:"waba_id,omitempty"`
	// PortfolioID is the business portfolio whose messaging limit the
	// number shares. Empty takes the WABA id: each account its own
	// portfolio.
	PortfolioID string `json:"portfolio_id,omitempty"`
}

// Faults are the switchable misbehaviours. The zero value is a healthy API.
type Faults struct {
	// Latency is added to every send, plus a uniform random part up to Jitter.
	Latency time.Duration
	Jitter  time.Duration
	// ErrorRate is the share of sends (0..1) answered 500 (131000) or 503
	// (131016) at random.
	ErrorRate float64
	// TimeoutRate is the share of sends (0..1) that get no answer: the
	// request hangs until the client gives up (or HangMax), then the
	// connection is closed. Such a send is not recorded: the provider never
	// processed it.
	TimeoutRate float64
	// PairInterval is the old spelling of Rules.PairRateInterval, kept
	// working: in Config.Faults it seeds the rule when Config.Rules sets
	// none; SetFaults with a positive value sets the rule; Faults reports
	// the rule.
	PairInterval time.Duration
	// Undeliverable numbers are accepted (200 and a wamid) and then get a
	// failed status with 131026, as the real API does for a number not on
	// WhatsApp. An entry is an exact number, or a prefix when it ends in
	// '*'; a leading '+' is ignored.
	Undeliverable []string
	// StoppedMarketing numbers (same form) are refused at once with 131050,
	// as the API answers for a user who stopped the business's marketing
	// messages.
	StoppedMarketing []string
	// SpamLimited phone number ids (exact) answer their MARKETING template
	// sends with 131048, as the Cloud API does for a number throttled for
	// its quality ("Spam rate limit hit"); other sends go.
	SpamLimited []string
}

// CallbackSettings say where and when status webhooks go; they can change
// while the simulator runs.
type CallbackSettings struct {
	// URL receives the webhooks; empty turns callbacks off (nothing is queued).
	URL string
	// AppSecret signs each body (X-Hub-Signature-256).
	AppSecret string
	// Delays from the send to "sent" (or "failed"), from "sent" to
	// "delivered" and from "delivered" to "read".
	SentDelay      time.Duration
	DeliveredDelay time.Duration
	ReadDelay      time.Duration
	// NoRead stops at delivered, as for users with read receipts off.
	NoRead bool
	// ReadAtOnce is the share (0..1) of messages read as they arrive: the
	// Cloud API then sends read without delivered ("delivered may be
	// skipped when a message is read at once", the status webhook
	// reference), at the delivered delay. Ignored with NoRead.
	ReadAtOnce float64
}

// CallbackConfig is CallbackSettings and the fixed shape of the queue.
type CallbackConfig struct {
	CallbackSettings
	// QueueSize bounds the statuses waiting to be posted; past it a status
	// is dropped and counted (callbacks_dropped).
	QueueSize int
	// BatchSize is the most statuses in one POST (as the real API batches).
	BatchSize int
	// Workers is the number of concurrent POSTs.
	Workers int
	// Timeout bounds one POST.
	Timeout time.Duration
	// MaxAttempts is how often a POST is tried before its statuses are
	// dropped (the real API retries for days; a test wants an answer).
	MaxAttempts int
}

// Config is what New needs. Zero fields take the defaults.
type Config struct {
	Accounts []Account
	// Throughput is the default sends per second of a phone number.
	Throughput int
	// Faults are the switches at start (and after Reset).
	Faults Faults
	// Callbacks are the status webhooks; the settings are those at start
	// (and after Reset).
	Callbacks CallbackConfig
	// Rules are the policies at start (and after Reset); nil takes
	// DefaultRules (Meta's 24-hour window, enforced).
	Rules *Rules
	// MessageBuffer is how many received messages are kept for inspection
	// (a ring: the oldest go first).
	MessageBuffer int
	// MaxRecipients bounds the per-recipient send counts, the pair rate
	// limiter and the service windows; sends to further recipients are
	// counted as untracked.
	MaxRecipients int
	// HangMax bounds how long a simulated timeout holds a request.
	HangMax time.Duration
	// Log receives the simulator's own events (never a message body).
	Log *zap.Logger
	// Registerer receives the Prometheus metrics; nil keeps them private.
	Registerer prometheus.Registerer
}

func (c Config) withDefaults() Config {
	if c.Throughput <= 0 {
		c.Throughput = DefaultThroughput
	}
	if c.MessageBuffer <= 0 {
		c.MessageBuffer = DefaultMessageBuffer
	}
	if c.MaxRecipients <= 0 {
		c.MaxRecipients = DefaultMaxRecipients
	}
	if c.HangMax <= 0 {
		c.HangMax = DefaultHangMax
	}
	cb := &c.Callbacks
	if cb.QueueSize <= 0 {
		cb.QueueSize = DefaultQueueSize
	}
	if cb.BatchSize <= 0 {
		cb.BatchSize = DefaultBatchSize
	}
	if cb.Workers <= 0 {
		cb.Workers = DefaultWorkers
	}
	if cb.Timeout <= 0 {
		cb.Timeout = DefaultCallbackWait
	}
	if cb.MaxAttempts <= 0 {
		cb.MaxAttempts = DefaultMaxAttempts
	}
	if c.Log == nil {
		c.Log = zap.NewNop()
	}
	r := DefaultRules()
	if c.Rules != nil {
		r = c.Rules.withDefaults() // a copy: the caller's value may change later
	}
	// The old spelling of the pair rate: Faults.PairInterval.
	if r.PairRateInterval == 0 && c.Faults.PairInterval > 0 {
		r.PairRateInterval = c.Faults.PairInterval
	}
	c.Rules = &r
	return c
}

// Sim is the simulated Cloud API. It is an http.Handler; Close stops its
// callback workers and releases hanging requests.
type Sim struct {
	cfg Config
	mux *http.ServeMux
	log *zap.Logger

	accMu     sync.Mutex // serialises writers of accounts
	accounts  atomic.Pointer[map[string]*account]
	tplMu     sync.Mutex // serialises template changes (and their timers)
	templates atomic.Pointer[map[string]*tmpl]
	tplIDs    atomic.Int64
	tierMu    sync.Mutex // serialises tier changes, so their webhooks keep order
	faults    atomic.Pointer[faultState]
	cbSet     atomic.Pointer[CallbackSettings]
	rules     atomic.Pointer[ruleState]

	ids       idGen
	counts    counters
	rec       *recorder
	pairs     *pairLimiter
	windows   *windows
	limits    *limits
	marketing *marketingLimit
	cb        *callbacks
	notes     *notifier
	m         *metrics

	closing   chan struct{}
	closeOnce sync.Once
}

// New builds a simulator and starts its callback workers.
func New(cfg Config) (*Sim, error) {
	cfg = cfg.withDefaults()
	s := &Sim{
		cfg:       cfg,
		log:       cfg.Log,
		rec:       newRecorder(cfg.MessageBuffer, cfg.MaxRecipients),
		pairs:     newPairLimiter(cfg.MaxRecipients),
		windows:   newWindows(cfg.MaxRecipients),
		limits:    newLimits(),
		marketing: newMarketingLimit(cfg.MaxRecipients),
		closing:   make(chan struct{}),
	}
	s.counts.init()
	if err := s.ids.init(); err != nil {
		return nil, err
	}
	accs := map[string]*account{}
	for _, a := range cfg.Accounts {
		acc, err := s.newAccount(a)
		if err != nil {
			return nil, err
		}
		if _, dup := accs[a.PhoneNumberID]; dup {
			return nil, fmt.Errorf("whatsappsim: account %s configured twice", a.PhoneNumberID)
		}
		accs[a.PhoneNumberID] = acc
	}
	s.accounts.Store(&accs)
	s.templates.Store(&map[string]*tmpl{})
	// Template ids look like Meta's: 15 digits or so, unique across restarts.
	s.tplIDs.Store(1_000_000_000_000_000 + mrand.Int64N(1_000_000_000_000_000))
	if err := s.SetRules(*cfg.Rules); err != nil {
		return nil, err
	}
	if err := s.storeFaults(cfg.Faults); err != nil {
		return nil, err
	}
	if err := s.SetCallbacks(cfg.Callbacks.CallbackSettings); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s.m = m
	s.cb = newCallbacks(s, cfg.Callbacks)
	if err := s.m.registerQueue(cfg.Registerer, s.cb.queue.len); err != nil {
		return nil, err
	}
	s.cb.start()
	s.notes = newNotifier(s)
	s.notes.start()
	s.mux = s.routes()
	return s, nil
}

// ServeHTTP serves the send endpoint and the /_sim/ admin endpoints.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close stops the callback workers (pending statuses are dropped) and
// answers hanging requests by closing their connections. It is idempotent.
func (s *Sim) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.stopTemplateTimers()
		s.notes.stop()
		s.cb.stop()
	})
	return nil
}

// account is a served number: its token and throughput bucket, its
// WhatsApp Business Account and business portfolio.
type account struct {
	id        string
	bearer    string // "Bearer <token>"
	rate      int
	bucket    *bucket
	waba      string
	portfolio string
}

// Validate checks the phone number id (1 to 32 digits, as the schema has
// it), that the token is one word, and that the throughput is not negative.
// Its errors never repeat the token.
func (a Account) Validate() error {
	switch {
	case !validPhoneNumberID(a.PhoneNumberID):
		return fmt.Errorf("whatsappsim: phone number id %q: want 1 to 32 digits", a.PhoneNumberID)
	case a.Token == "" || strings.ContainsAny(a.Token, " \t\r\n"):
		return fmt.Errorf("whatsappsim: account %s: token is empty or has spaces", a.PhoneNumberID)
	case a.ThroughputPerSecond < 0:
		return fmt.Errorf("whatsappsim: account %s: negative throughput", a.PhoneNumberID)
	case a.WABAID != "" && !validPhoneNumberID(a.WABAID):
		return fmt.Errorf("whatsappsim: account %s: waba_id %q: want 1 to 32 digits", a.PhoneNumberID, a.WABAID)
	case a.PortfolioID != "" && !validPortfolioID(a.PortfolioID):
		return fmt.Errorf("whatsappsim: account %s: portfolio_id %q: want 1 to 64 letters, digits, '.', '_' or '-'", a.PhoneNumberID, a.PortfolioID)
	}
	return nil
}

func validPortfolioID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, r := range id {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

func (s *Sim) newAccount(a Account) (*account, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	rate := a.ThroughputPerSecond
	if rate == 0 {
		rate = s.cfg.Throughput
	}
	waba := a.WABAID
	if waba == "" {
		waba = a.PhoneNumberID
	}
	portfolio := a.PortfolioID
	if portfolio == "" {
		portfolio = waba
	}
	return &account{id: a.PhoneNumberID, bearer: "Bearer " + a.Token, rate: rate, bucket: newBucket(rate), waba: waba, portfolio: portfolio}, nil
}

func validPhoneNumberID(id string) bool {
	if id == "" || len(id) > 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < '0' || id[i] > '9' {
			return false
		}
	}
	return true
}

// SetAccount adds or replaces a served number (its token, throughput,
// account and portfolio).
func (s *Sim) SetAccount(a Account) error {
	acc, err := s.newAccount(a)
	if err != nil {
		return err
	}
	s.accMu.Lock()
	defer s.accMu.Unlock()
	old := *s.accounts.Load()
	next := make(map[string]*account, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[a.PhoneNumberID] = acc
	s.accounts.Store(&next)
	return nil
}

// RemoveAccount stops serving a number; its sends then get the unknown
// object error (100, subcode 33). It reports whether the number was served.
func (s *Sim) RemoveAccount(phoneNumberID string) bool {
	s.accMu.Lock()
	defer s.accMu.Unlock()
	old := *s.accounts.Load()
	if _, ok := old[phoneNumberID]; !ok {
		return false
	}
	next := make(map[string]*account, len(old))
	for k, v := range old {
		if k != phoneNumberID {
			next[k] = v
		}
	}
	s.accounts.Store(&next)
	return true
}

// Accounts lists the served numbers with their throughput, WABA and
// portfolio (defaults resolved), not the tokens.
func (s *Sim) Accounts() []Account {
	accs := *s.accounts.Load()
	out := make([]Account, 0, len(accs))
	for _, a := range accs {
		out = append(out, Account{PhoneNumberID: a.id, ThroughputPerSecond: a.rate, WABAID: a.waba, PortfolioID: a.portfolio})
	}
	sortAccounts(out)
	return out
}

// faultState is Faults made quick to consult on every send.
type faultState struct {
	Faults
	undeliverableSet numberSet
	stoppedSet       numberSet
	spamSet          numberSet
}

// numberSet is a list of exact numbers and prefixes.
type numberSet struct {
	exact    map[string]struct{}
	prefixes []string
}

func (n numberSet) has(digits string) bool {
	if _, ok := n.exact[digits]; ok {
		return true
	}
	for _, p := range n.prefixes {
		if strings.HasPrefix(digits, p) {
			return true
		}
	}
	return false
}

func (f *faultState) undeliverable(digits string) bool { return f.undeliverableSet.has(digits) }

func (f *faultState) stoppedMarketing(digits string) bool { return f.stoppedSet.has(digits) }

func (f *faultState) spamLimited(phoneNumberID string) bool { return f.spamSet.has(phoneNumberID) }

// parseNumbers reads entries of digits, each optionally ending in '*' (a
// prefix); a leading '+' is ignored.
func parseNumbers(name string, entries []string) (numberSet, []error) {
	set := numberSet{exact: map[string]struct{}{}}
	var errs []error
	for _, u := range entries {
		u = strings.TrimPrefix(strings.TrimSpace(u), "+")
		prefix := strings.HasSuffix(u, "*")
		u = strings.TrimSuffix(u, "*")
		if u == "" || strings.Trim(u, "0123456789") != "" {
			errs = append(errs, fmt.Errorf("%s entry %q: want digits, optionally ending in *", name, u))
			continue
		}
		if prefix {
			set.prefixes = append(set.prefixes, u)
		} else {
			set.exact[u] = struct{}{}
		}
	}
	return set, errs
}

// Validate reports every problem with the switches.
func (f Faults) Validate() error {
	_, err := f.state()
	return err
}

func (f Faults) state() (*faultState, error) {
	var errs []error
	if f.Latency < 0 || f.Jitter < 0 || f.PairInterval < 0 {
		errs = append(errs, errors.New("latency, jitter and pair interval must not be negative"))
	}
	if f.ErrorRate < 0 || f.ErrorRate > 1 || f.TimeoutRate < 0 || f.TimeoutRate > 1 {
		errs = append(errs, errors.New("error and timeout rates are shares between 0 and 1"))
	}
	st := &faultState{}
	var errs1, errs2, errs3 []error
	st.undeliverableSet, errs1 = parseNumbers("undeliverable", f.Undeliverable)
	st.stoppedSet, errs2 = parseNumbers("stopped_marketing", f.StoppedMarketing)
	st.spamSet, errs3 = parseNumbers("spam_limited", f.SpamLimited)
	errs = append(append(append(errs, errs1...), errs2...), errs3...)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("whatsappsim: faults: %w", err)
	}
	f.Undeliverable = append([]string(nil), f.Undeliverable...)
	f.StoppedMarketing = append([]string(nil), f.StoppedMarketing...)
	f.SpamLimited = append([]string(nil), f.SpamLimited...)
	st.Faults = f
	return st, nil
}

// SetFaults replaces every fault switch. A positive PairInterval sets
// Rules.PairRateInterval (its old spelling); zero leaves the rule alone.
func (s *Sim) SetFaults(f Faults) error {
	if err := s.storeFaults(f); err != nil {
		return err
	}
	if f.PairInterval > 0 {
		s.setPairRate(f.PairInterval)
	}
	return nil
}

// storeFaults replaces the switches without touching the pair rate rule
// (New and Reset: the configuration's rules already hold it).
func (s *Sim) storeFaults(f Faults) error {
	st, err := f.state()
	if err != nil {
		return err
	}
	st.PairInterval = 0 // the rule holds it
	s.faults.Store(st)
	return nil
}

func (s *Sim) setPairRate(d time.Duration) {
	r := s.Rules()
	r.PairRateInterval = d
	_ = s.SetRules(r) // d is not negative: the rules stay valid
}

// Faults returns the current switches; PairInterval is the pair rate rule.
func (s *Sim) Faults() Faults {
	f := s.faults.Load().Faults
	f.Undeliverable = append([]string(nil), f.Undeliverable...)
	f.StoppedMarketing = append([]string(nil), f.StoppedMarketing...)
	f.PairInterval = s.Rules().PairRateInterval
	return f
}

// Validate checks the URL (http or https, with a host), that a URL comes
// with an app secret, and that no delay is negative.
func (c CallbackSettings) Validate() error {
	var errs []error
	if c.URL != "" {
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("callback URL %q: want http(s)://host/path", c.URL))
		}
		if c.AppSecret == "" {
			errs = append(errs, errors.New("a callback URL needs an app secret to sign with"))
		}
	}
	if c.SentDelay < 0 || c.DeliveredDelay < 0 || c.ReadDelay < 0 {
		errs = append(errs, errors.New("callback delays must not be negative"))
	}
	if c.ReadAtOnce < 0 || c.ReadAtOnce > 1 {
		errs = append(errs, fmt.Errorf("read at once %v: want a share from 0 to 1", c.ReadAtOnce))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("whatsappsim: callbacks: %w", err)
	}
	return nil
}

// SetCallbacks replaces where and when status webhooks go. Statuses
// already queued go to the new URL.
func (s *Sim) SetCallbacks(c CallbackSettings) error {
	if err := c.Validate(); err != nil {
		return err
	}
	s.cbSet.Store(&c)
	return nil
}

// CallbackSettings returns the current callback settings.
func (s *Sim) CallbackSettings() CallbackSettings { return *s.cbSet.Load() }

// Reset clears what was received (messages, counts, statistics, the pair
// limiter, the service windows, the users each portfolio reached, the
// users declined by the marketing limit, queued webhooks), refills every
// throughput bucket, and puts the faults, callback settings, rules and
// portfolio tiers (unlimited) back to the configuration's. Accounts and
// templates (with their status, quality and pauses) stay: they are set-up,
// not state.
func (s *Sim) Reset() {
	s.cb.reset()
	s.notes.reset()
	s.rec.reset()
	s.pairs.reset()
	s.windows.reset()
	s.limits.reset()
	s.marketing.reset()
	_ = s.SetRules(*s.cfg.Rules)
	for _, a := range *s.accounts.Load() {
		a.bucket.refill()
	}
	_ = s.storeFaults(s.cfg.Faults)
	_ = s.SetCallbacks(s.cfg.Callbacks.CallbackSettings)
	s.counts.reset()
}

// idGen makes unique wamids: a random per-process prefix, so that ids stay
// unique across restarts, and a counter.
type idGen struct {
	prefix string
	n      atomic.Uint64
}

func (g *idGen) init() error {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("whatsappsim: random id prefix: %w", err)
	}
	g.prefix = "wamid.HBgSIM" + strings.ToUpper(hex.EncodeToString(b[:])) + "_"
	return nil
}

func (g *idGen) next() string {
	return g.prefix + strconv.FormatUint(g.n.Add(1), 36)
}

// trace is an fbtrace_id: opaque, different on every answer.
func (g *idGen) trace() string {
	return "Sim" + strconv.FormatUint(mrand.Uint64(), 36)
}

// sleep waits d unless the request or the simulator ends first.
func (s *Sim) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-s.closing:
	}
	return false
}
