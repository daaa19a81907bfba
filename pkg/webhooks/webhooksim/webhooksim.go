// Package webhooksim is a test receiver of Parley's webhooks: it verifies
// every delivery's Standard Webhooks signature, counts deliveries per
// webhook-id, measures each event's latency from its change (the body's
// timestamp) to its receipt, and can be told to answer 500, 429 with a
// Retry-After, to hang, or to be down (connections closed unanswered), so
// that tests and drills observe the webhook sender from outside.
//
// It serves any number of named endpoints: deliveries go to POST
// /hooks/{name}; /_control/{name} sets (PUT) an endpoint's secret and mode,
// reads (GET) its figures, or resets them (DELETE). provider-sim mounts it
// under /_webhooks/.
package webhooksim

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/parleyhq/parley/pkg/webhooks"
)

// Mode is how an endpoint answers.
type Mode string

// The modes.
const (
	ModeOK   Mode = "ok"   // 204 after verifying
	Mode500  Mode = "500"  // 500, after counting the delivery as seen
	Mode429  Mode = "429"  // 429 with Retry-After
	ModeHang Mode = "hang" // holds the request until the client gives up
	ModeDown Mode = "down" // closes the connection without an answer
)

// Settings are an endpoint's secret and mode.
type Settings struct {
	// Secrets are the whsec_ secrets whose signatures are accepted (the
	// current one and, during a rotation, the previous one).
	Secrets []string `json:"secrets"`
	Mode    Mode     `json:"mode"`
	// RetryAfter is the Retry-After of ModeOK's 429 answers, in seconds.
	RetryAfter int `json:"retry_after,omitempty"`
}

// Stats are an endpoint's figures.
type Stats struct {
	// Requests is every request received, whatever the answer.
	Requests int `json:"requests"`
	// Accepted is the deliveries answered 2xx with a valid signature.
	Accepted int `json:"accepted"`
	// Unique is the distinct webhook-ids accepted; Duplicates is
	// Accepted - Unique.
	Unique     int `json:"unique"`
	Duplicates int `json:"duplicates"`
	// BadSignature counts requests refused for their signature or headers.
	BadSignature int            `json:"bad_signature"`
	ByType       map[string]int `json:"by_type"`
	// Latency of the first receipt of each event from its timestamp, ms.
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
	MaxMS float64 `json:"max_ms"`
	// First and Last are the first and last accepted receipts.
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
}

type endpoint struct {
	settings  Settings
	keys      [][]byte
	requests  int
	accepted  int
	bad       int
	counts    map[string]int
	byType    map[string]int
	latencies []float64
	first     time.Time
	last      time.Time
}

// Receiver is the test receiver; it is an http.Handler.
type Receiver struct {
	mu   sync.Mutex
	eps  map[string]*endpoint
	hang chan struct{}
	once sync.Once
	// Tolerance is how far a webhook-timestamp may be from now.
	Tolerance time.Duration
	// Observe, when set before the receiver serves, is called with every
	// event accepted (verified, answered 204), duplicates included, with
	// its endpoint's name, its webhook-id, its body and when it arrived: a
	// benchmark counts what the events carry (a message.received's wamid)
	// with it.
	Observe func(name, id string, body []byte, at time.Time)
}

// New returns a receiver with no endpoints.
func New() *Receiver {
	return &Receiver{eps: map[string]*endpoint{}, hang: make(chan struct{}), Tolerance: webhooks.DefaultTolerance}
}

// Close answers the hanging requests.
func (r *Receiver) Close() { r.once.Do(func() { close(r.hang) }) }

// Set configures an endpoint (created if new; its figures are kept).
func (r *Receiver) Set(name string, s Settings) error {
	keys := make([][]byte, 0, len(s.Secrets))
	for _, sec := range s.Secrets {
		k, err := webhooks.ParseSecret(sec)
		if err != nil {
			return err
		}
		keys = append(keys, k)
	}
	if s.Mode == "" {
		s.Mode = ModeOK
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ep := r.eps[name]
	if ep == nil {
		ep = &endpoint{counts: map[string]int{}, byType: map[string]int{}}
		r.eps[name] = ep
	}
	ep.settings, ep.keys = s, keys
	return nil
}

// SetMode changes only an endpoint's mode.
func (r *Receiver) SetMode(name string, m Mode, retryAfter int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ep := r.eps[name]; ep != nil {
		ep.settings.Mode, ep.settings.RetryAfter = m, retryAfter
	}
}

// Reset forgets an endpoint's figures.
func (r *Receiver) Reset(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ep := r.eps[name]; ep != nil {
		ep.requests, ep.accepted, ep.bad, ep.latencies = 0, 0, 0, nil
		ep.counts, ep.byType = map[string]int{}, map[string]int{}
		ep.first, ep.last = time.Time{}, time.Time{}
	}
}

// Counts returns how many times each webhook-id was accepted.
func (r *Receiver) Counts(name string) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	if ep := r.eps[name]; ep != nil {
		for k, v := range ep.counts {
			out[k] = v
		}
	}
	return out
}

// Stats returns an endpoint's figures.
func (r *Receiver) Stats(name string) Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	ep := r.eps[name]
	if ep == nil {
		return Stats{ByType: map[string]int{}}
	}
	st := Stats{Requests: ep.requests, Accepted: ep.accepted, Unique: len(ep.counts), BadSignature: ep.bad,
		ByType: map[string]int{}, First: ep.first, Last: ep.last}
	st.Duplicates = st.Accepted - st.Unique
	for k, v := range ep.byType {
		st.ByType[k] = v
	}
	if n := len(ep.latencies); n > 0 {
		l := slices.Clone(ep.latencies)
		slices.Sort(l)
		at := func(q float64) float64 { return l[min(int(q*float64(n)), n-1)] }
		st.P50MS, st.P99MS, st.MaxMS = at(0.50), at(0.99), l[n-1]
	}
	return st
}

func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	path := strings.TrimPrefix(req.URL.Path, "/")
	switch {
	case strings.HasPrefix(path, "hooks/") && req.Method == http.MethodPost:
		r.receive(w, req, strings.TrimPrefix(path, "hooks/"))
	case strings.HasPrefix(path, "_control/"):
		r.control(w, req, strings.TrimPrefix(path, "_control/"))
	default:
		http.NotFound(w, req)
	}
}

func (r *Receiver) control(w http.ResponseWriter, req *http.Request, name string) {
	w.Header().Set("Content-Type", "application/json")
	name, ids := strings.CutSuffix(name, "/ids")
	switch req.Method {
	case http.MethodPut:
		var s Settings
		if err := json.NewDecoder(io.LimitReader(req.Body, 1<<20)).Decode(&s); err != nil {
			http.Error(w, `{"detail":"bad settings"}`, http.StatusBadRequest)
			return
		}
		if err := r.Set(name, s); err != nil {
			http.Error(w, `{"detail":"bad secret"}`, http.StatusUnprocessableEntity)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case http.MethodDelete:
		r.Reset(name)
		w.WriteHeader(http.StatusNoContent)
	case http.MethodGet:
		if ids {
			_ = json.NewEncoder(w).Encode(r.Counts(name))
			return
		}
		_ = json.NewEncoder(w).Encode(r.Stats(name))
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func (r *Receiver) receive(w http.ResponseWriter, req *http.Request, name string) {
	r.mu.Lock()
	ep := r.eps[name]
	var s Settings
	var keys [][]byte
	if ep != nil {
		ep.requests++
		s, keys = ep.settings, ep.keys
	}
	r.mu.Unlock()
	if ep == nil {
		http.NotFound(w, req)
		return
	}
	switch s.Mode {
	case ModeDown:
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				_ = c.Close()
				return
			}
		}
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	case ModeHang:
		select {
		case <-req.Context().Done():
		case <-r.hang:
		}
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		return
	}
	now := time.Now()
	if err := webhooks.VerifyRequest(keys, req.Header, body, now, r.Tolerance); err != nil {
		r.mu.Lock()
		ep.bad++
		r.mu.Unlock()
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	switch s.Mode {
	case Mode500:
		http.Error(w, "simulated failure", http.StatusInternalServerError)
		return
	case Mode429:
		if s.RetryAfter > 0 {
			w.Header().Set("Retry-After", itoa(s.RetryAfter))
		}
		http.Error(w, "slow down", http.StatusTooManyRequests)
		return
	}
	var b webhooks.Body
	_ = json.Unmarshal(body, &b)
	id := req.Header.Get(webhooks.HeaderID)
	r.mu.Lock()
	ep.accepted++
	ep.counts[id]++
	if ep.counts[id] == 1 {
		ep.byType[b.Type]++
		if !b.Timestamp.IsZero() {
			ep.latencies = append(ep.latencies, float64(now.Sub(b.Timestamp).Microseconds())/1000)
		}
	}
	if ep.first.IsZero() {
		ep.first = now
	}
	ep.last = now
	r.mu.Unlock()
	if r.Observe != nil {
		r.Observe(name, id, body, now)
	}
	w.WriteHeader(http.StatusNoContent)
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
