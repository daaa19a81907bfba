package whatsappsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// routes mounts the send endpoint and the admin endpoints. The admin
// endpoints have no authentication: the simulator is a loopback test tool.
//
//	POST   /{version}/{phone_number_id}/messages   the Cloud API send
//	POST   /{version}/{waba_id}/message_templates  create a template (PENDING, then reviewed)
//	GET    /{version}/{waba_id}/message_templates  list templates (name, status, category, language; paged)
//	GET    /_sim/stats                             Stats
//	GET    /_sim/messages?to=&phone_number_id=&limit=   received messages, oldest first
//	GET    /_sim/recipients?min=2&limit=           recipients by send count (duplicates)
//	POST   /_sim/recipients/counts                 {"to":[...]}: each one's send count, 0 included
//	POST   /_sim/reset                             Reset
//	GET    /_sim/faults, PATCH /_sim/faults        fault switches (PATCH merges)
//	POST   /_sim/replies                           a user's message (any type), posted signed to the callback URL
//	POST   /_sim/replies/batch                     {"replies":[...]}: several in one webhook
//	GET    /_sim/rules, PATCH /_sim/rules          policies: window, templates, limits, pair rate, time scale (PATCH merges)
//	GET    /_sim/windows/{phone_number_id}/{user}  one user's customer service window
//	GET    /_sim/callbacks, PATCH /_sim/callbacks  status webhook settings (PATCH merges)
//	GET    /_sim/accounts                          served numbers (no tokens)
//	PUT    /_sim/accounts/{phone_number_id}        {"token","throughput_per_second","waba_id","portfolio_id"}
//	DELETE /_sim/accounts/{phone_number_id}
//	GET    /_sim/portfolios                        portfolios: tier, numbers, users reached, refusals
//	PUT    /_sim/portfolios/{portfolio_id}         {"tier":"TIER_2K"}: phone_number_quality_update
//	GET    /_sim/templates                         every template with its status, quality, pauses
//	PUT    /_sim/templates/{name}/{language}       {"header","body_parameters","url_buttons","category"}: APPROVED, for every account
//	DELETE /_sim/templates/{name}/{language}
//	DELETE /_sim/templates/{id}                    any template
//	POST   /_sim/templates/{id}/review             {"status":"APPROVED|REJECTED","reason"}: decide a PENDING one now
//	POST   /_sim/templates/{id}/quality            {"quality":"GREEN|YELLOW|RED"}: message_template_quality_update
//	POST   /_sim/templates/{id}/category           {"category":"MARKETING"}: template_category_update
//	POST   /_sim/templates/{id}/pause              PAUSED 3h, then 6h, DISABLED the third time
//	POST   /_sim/templates/{id}/unpause            APPROVED at once
func (s *Sim) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /{version}/{phone_number_id}/messages", s.handleSend)
	mux.HandleFunc("POST /{version}/{waba_id}/message_templates", s.handleCreateTemplate)
	mux.HandleFunc("GET /{version}/{waba_id}/message_templates", s.handleListTemplates)
	mux.HandleFunc("GET /_sim/stats", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.Stats()) })
	mux.HandleFunc("GET /_sim/messages", s.handleMessages)
	mux.HandleFunc("GET /_sim/recipients", s.handleRecipients)
	mux.HandleFunc("POST /_sim/recipients/counts", s.handleRecipientCounts)
	mux.HandleFunc("POST /_sim/reset", func(w http.ResponseWriter, _ *http.Request) {
		s.Reset()
		writeJSON(w, http.StatusOK, map[string]string{"status": "reset"})
	})
	mux.HandleFunc("GET /_sim/faults", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, viewFaults(s.Faults())) })
	mux.HandleFunc("PATCH /_sim/faults", s.handlePatchFaults)
	mux.HandleFunc("POST /_sim/replies", s.handleReply)
	mux.HandleFunc("POST /_sim/replies/batch", s.handleReplyBatch)
	mux.HandleFunc("GET /_sim/rules", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, viewRules(s.Rules())) })
	mux.HandleFunc("PATCH /_sim/rules", s.handlePatchRules)
	mux.HandleFunc("GET /_sim/windows/{phone_number_id}/{user}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Window(r.PathValue("phone_number_id"), r.PathValue("user")))
	})
	mux.HandleFunc("GET /_sim/callbacks", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, viewCallbacks(s.CallbackSettings()))
	})
	mux.HandleFunc("PATCH /_sim/callbacks", s.handlePatchCallbacks)
	mux.HandleFunc("GET /_sim/accounts", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.Accounts()) })
	mux.HandleFunc("PUT /_sim/accounts/{phone_number_id}", s.handlePutAccount)
	mux.HandleFunc("DELETE /_sim/accounts/{phone_number_id}", func(w http.ResponseWriter, r *http.Request) {
		if !s.RemoveAccount(r.PathValue("phone_number_id")) {
			writeDetail(w, http.StatusNotFound, "no such account")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /_sim/portfolios", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.Portfolios()) })
	mux.HandleFunc("PUT /_sim/portfolios/{portfolio_id}", s.handlePutPortfolio)
	mux.HandleFunc("GET /_sim/templates", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.TemplateStates()) })
	mux.HandleFunc("DELETE /_sim/templates/{id}", func(w http.ResponseWriter, r *http.Request) {
		if !s.RemoveTemplateByID(r.PathValue("id")) {
			writeDetail(w, http.StatusNotFound, "no such template")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /_sim/templates/{id}/review", s.handleReviewTemplate)
	mux.HandleFunc("POST /_sim/templates/{id}/quality", s.handleTemplateQuality)
	mux.HandleFunc("POST /_sim/templates/{id}/category", s.handleTemplateCategory)
	mux.HandleFunc("POST /_sim/templates/{id}/pause", func(w http.ResponseWriter, r *http.Request) {
		t, err := s.PauseTemplate(r.PathValue("id"))
		s.lifecycleAnswer(w, t, err)
	})
	mux.HandleFunc("POST /_sim/templates/{id}/unpause", func(w http.ResponseWriter, r *http.Request) {
		t, err := s.UnpauseTemplate(r.PathValue("id"))
		s.lifecycleAnswer(w, t, err)
	})
	mux.HandleFunc("PUT /_sim/templates/{name}/{language}", s.handlePutTemplate)
	mux.HandleFunc("DELETE /_sim/templates/{name}/{language}", func(w http.ResponseWriter, r *http.Request) {
		if !s.RemoveTemplate(r.PathValue("name"), r.PathValue("language")) {
			writeDetail(w, http.StatusNotFound, "no such template")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeDetail(w http.ResponseWriter, status int, detail string) {
	writeJSON(w, status, map[string]string{"detail": detail})
}

// decodeStrict reads a small admin body, refusing unknown fields so that a
// typo does not pass silently.
func decodeStrict(r *http.Request, v any) error { return decodeStrictN(r, v, 1<<20) }

// decodeStrictN is decodeStrict for a body of up to limit bytes.
func decodeStrictN(r *http.Request, v any, limit int64) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	return nil
}

func queryInt(r *http.Request, name string, def int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, errors.New(name + " must be a non-negative integer")
	}
	return n, nil
}

func (s *Sim) handleMessages(w http.ResponseWriter, r *http.Request) {
	limit, err := queryInt(r, "limit", 100)
	if err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	q := r.URL.Query()
	msgs := s.Messages(Filter{To: q.Get("to"), PhoneNumberID: q.Get("phone_number_id"), Limit: min(max(limit, 1), s.cfg.MessageBuffer)})
	if msgs == nil {
		msgs = []Received{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": msgs, "count": len(msgs)})
}

func (s *Sim) handleRecipients(w http.ResponseWriter, r *http.Request) {
	minCount, err := queryInt(r, "min", 1)
	if err == nil && minCount == 0 {
		minCount = 1
	}
	limit, err2 := queryInt(r, "limit", 100)
	if err = errors.Join(err, err2); err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	if to := r.URL.Query().Get("to"); to != "" {
		writeJSON(w, http.StatusOK, RecipientCount{To: to, Count: s.SendCount(to)})
		return
	}
	writeJSON(w, http.StatusOK, s.Recipients(int64(minCount), min(max(limit, 1), 10_000)))
}

// MaxCountsLookup is the most recipients one POST /_sim/recipients/counts
// names; a caller with more asks in several requests.
const MaxCountsLookup = 10_000

func (s *Sim) handleRecipientCounts(w http.ResponseWriter, r *http.Request) {
	var body struct {
		To []string `json:"to"`
	}
	if err := decodeStrict(r, &body); err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	if len(body.To) > MaxCountsLookup {
		writeDetail(w, http.StatusBadRequest, fmt.Sprintf("at most %d recipients per request", MaxCountsLookup))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"counts": s.SendCounts(body.To)})
}

type faultsView struct {
	LatencyMS      int64    `json:"latency_ms"`
	JitterMS       int64    `json:"jitter_ms"`
	ErrorRate      float64  `json:"error_rate"`
	TimeoutRate    float64  `json:"timeout_rate"`
	PairIntervalMS int64    `json:"pair_interval_ms"`
	Undeliverable  []string `json:"undeliverable"`
	// StoppedMarketing numbers are refused with 131050.
	StoppedMarketing []string `json:"stopped_marketing"`
	// SpamLimited numbers (phone number ids) answer marketing sends with 131048.
	SpamLimited []string `json:"spam_limited"`
}

func viewFaults(f Faults) faultsView {
	u := f.Undeliverable
	if u == nil {
		u = []string{}
	}
	sm := f.StoppedMarketing
	if sm == nil {
		sm = []string{}
	}
	return faultsView{
		LatencyMS: f.Latency.Milliseconds(), JitterMS: f.Jitter.Milliseconds(),
		ErrorRate: f.ErrorRate, TimeoutRate: f.TimeoutRate,
		PairIntervalMS: f.PairInterval.Milliseconds(), Undeliverable: u, StoppedMarketing: sm,
		SpamLimited: append([]string{}, f.SpamLimited...),
	}
}

type faultsPatch struct {
	LatencyMS        *int64    `json:"latency_ms"`
	JitterMS         *int64    `json:"jitter_ms"`
	ErrorRate        *float64  `json:"error_rate"`
	TimeoutRate      *float64  `json:"timeout_rate"`
	PairIntervalMS   *int64    `json:"pair_interval_ms"`
	Undeliverable    *[]string `json:"undeliverable"`
	StoppedMarketing *[]string `json:"stopped_marketing"`
	SpamLimited      *[]string `json:"spam_limited"`
}

func (s *Sim) handlePatchFaults(w http.ResponseWriter, r *http.Request) {
	var p faultsPatch
	if err := decodeStrict(r, &p); err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	f := s.Faults()
	setMS(&f.Latency, p.LatencyMS)
	setMS(&f.Jitter, p.JitterMS)
	setMS(&f.PairInterval, p.PairIntervalMS)
	if p.ErrorRate != nil {
		f.ErrorRate = *p.ErrorRate
	}
	if p.TimeoutRate != nil {
		f.TimeoutRate = *p.TimeoutRate
	}
	if p.Undeliverable != nil {
		f.Undeliverable = *p.Undeliverable
	}
	if p.StoppedMarketing != nil {
		f.StoppedMarketing = *p.StoppedMarketing
	}
	if p.SpamLimited != nil {
		f.SpamLimited = *p.SpamLimited
	}
	if err := s.storeFaults(f); err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	// pair_interval_ms is the old spelling of the rule pair_rate_interval.
	if p.PairIntervalMS != nil {
		s.setPairRate(f.PairInterval)
	}
	writeJSON(w, http.StatusOK, viewFaults(s.Faults()))
}

func setMS(d *time.Duration, ms *int64) {
	if ms != nil {
		*d = time.Duration(*ms) * time.Millisecond
	}
}

type callbacksView struct {
	URL              string  `json:"url"`
	AppSecretSet     bool    `json:"app_secret_set"`
	SentDelayMS      int64   `json:"sent_delay_ms"`
	DeliveredDelayMS int64   `json:"delivered_delay_ms"`
	ReadDelayMS      int64   `json:"read_delay_ms"`
	Read             bool    `json:"read"`
	ReadAtOnce       float64 `json:"read_at_once"`
}

func viewCallbacks(c CallbackSettings) callbacksView {
	return callbacksView{
		URL: c.URL, AppSecretSet: c.AppSecret != "",
		SentDelayMS: c.SentDelay.Milliseconds(), DeliveredDelayMS: c.DeliveredDelay.Milliseconds(),
		ReadDelayMS: c.ReadDelay.Milliseconds(), Read: !c.NoRead, ReadAtOnce: c.ReadAtOnce,
	}
}

type callbacksPatch struct {
	URL              *string  `json:"url"`
	AppSecret        *string  `json:"app_secret"`
	SentDelayMS      *int64   `json:"sent_delay_ms"`
	DeliveredDelayMS *int64   `json:"delivered_delay_ms"`
	ReadDelayMS      *int64   `json:"read_delay_ms"`
	Read             *bool    `json:"read"`
	ReadAtOnce       *float64 `json:"read_at_once"`
}

func (s *Sim) handlePatchCallbacks(w http.ResponseWriter, r *http.Request) {
	var p callbacksPatch
	if err := decodeStrict(r, &p); err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	c := s.CallbackSettings()
	if p.URL != nil {
		c.URL = *p.URL
	}
	if p.AppSecret != nil {
		c.AppSecret = *p.AppSecret
	}
	setMS(&c.SentDelay, p.SentDelayMS)
	setMS(&c.DeliveredDelay, p.DeliveredDelayMS)
	setMS(&c.ReadDelay, p.ReadDelayMS)
	if p.Read != nil {
		c.NoRead = !*p.Read
	}
	if p.ReadAtOnce != nil {
		c.ReadAtOnce = *p.ReadAtOnce
	}
	if err := s.SetCallbacks(c); err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, viewCallbacks(s.CallbackSettings()))
}

func (s *Sim) handlePutAccount(w http.ResponseWriter, r *http.Request) {
	var a Account
	if err := decodeStrict(r, &a); err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	id := r.PathValue("phone_number_id")
	if a.PhoneNumberID != "" && a.PhoneNumberID != id {
		writeDetail(w, http.StatusBadRequest, "phone_number_id in the body differs from the path")
		return
	}
	a.PhoneNumberID = id
	if err := s.SetAccount(a); err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	for _, got := range s.Accounts() {
		if got.PhoneNumberID == id {
			writeJSON(w, http.StatusOK, got)
			return
		}
	}
}

func (s *Sim) handlePutTemplate(w http.ResponseWriter, r *http.Request) {
	var t TemplateSpec
	if err := decodeStrict(r, &t); err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	t.Name, t.Language = r.PathValue("name"), r.PathValue("language")
	if err := s.SetTemplate(t); err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	if st, ok := s.FindTemplate("", t.Name, t.Language); ok {
		writeJSON(w, http.StatusOK, st)
	}
}
