package whatsappsim

import (
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

// Received is one accepted send, kept for inspection.
type Received struct {
	ID            string `json:"id"`
	PhoneNumberID string `json:"phone_number_id"`
	To            string `json:"to"`
	// Type is template, or the session message's type (text, image, ...).
	Type string `json:"type"`
	// Template, Language and Components are a template message's.
	Template   string               `json:"template"`
	Language   string               `json:"language"`
	Components []whatsapp.Component `json:"components,omitempty"`
	// Session is a session message as it was sent.
	Session *whatsapp.Session `json:"session,omitempty"`
	// Undeliverable is true when the number was switched undeliverable: it
	// gets a failed status instead of sent/delivered/read.
	Undeliverable bool `json:"undeliverable"`
	// FailedWith is the error code of the failed status the message gets
	// instead of sent/delivered/read: 131026 (undeliverable), 131047
	// (outside the customer service window), 131049 (the per-user
	// marketing limit) or the rules' messaging limit code (131049 by
	// default); 0 when it is delivered.
	FailedWith int       `json:"failed_with,omitempty"`
	ReceivedAt time.Time `json:"received_at"`
}

// Filter selects received messages; empty fields match all.
type Filter struct {
	To            string
	PhoneNumberID string
	// Limit is the most messages returned (the newest); 0 means 100.
	Limit int
}

// RecipientCount is how many sends one recipient got.
type RecipientCount struct {
	To    string `json:"to"`
	Count int64  `json:"count"`
}

// rateWindow is how many whole seconds the recent rate averages.
const rateWindow = 5

// recorder keeps the ring of received messages, the per-recipient counts
// and the per-second buckets of the recent rate, under one lock taken once
// per accepted send.
type recorder struct {
	mu            sync.Mutex
	ring          []Received
	next, n       int
	counts        map[string]int64
	maxRecipients int
	accepted      int64
	untracked     int64
	duplicates    int64
	maxCount      int64
	secs          [rateWindow + 2]struct{ sec, n int64 }
	since         time.Time
}

func newRecorder(buffer, maxRecipients int) *recorder {
	return &recorder{
		ring:          make([]Received, buffer),
		counts:        map[string]int64{},
		maxRecipients: maxRecipients,
		since:         time.Now(),
	}
}

func (r *recorder) record(m Received) {
	sec := m.ReceivedAt.Unix()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ring[r.next] = m
	r.next = (r.next + 1) % len(r.ring)
	r.n = min(r.n+1, len(r.ring))
	r.accepted++
	b := &r.secs[sec%int64(len(r.secs))]
	if b.sec != sec {
		b.sec, b.n = sec, 0
	}
	b.n++
	c, ok := r.counts[m.To]
	if !ok && len(r.counts) >= r.maxRecipients {
		r.untracked++
		return
	}
	c++
	r.counts[m.To] = c
	if c == 2 {
		r.duplicates++
	}
	r.maxCount = max(r.maxCount, c)
}

func (r *recorder) messages(f Filter) []Received {
	to := strings.TrimPrefix(f.To, "+")
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Received
	for i := 0; i < r.n && len(out) < limit; i++ {
		m := &r.ring[(r.next-1-i+2*len(r.ring))%len(r.ring)]
		if (to == "" || m.To == to) && (f.PhoneNumberID == "" || m.PhoneNumberID == f.PhoneNumberID) {
			out = append(out, *m)
		}
	}
	// Oldest first, as they arrived.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

func (r *recorder) count(to string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[strings.TrimPrefix(to, "+")]
}

// countsOf is each recipient's count, in the order given.
func (r *recorder) countsOf(tos []string) []RecipientCount {
	out := make([]RecipientCount, len(tos))
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, to := range tos {
		out[i] = RecipientCount{To: to, Count: r.counts[strings.TrimPrefix(to, "+")]}
	}
	return out
}

// recipients lists recipients with at least minCount sends, most first.
func (r *recorder) recipients(minCount int64, limit int) []RecipientCount {
	if limit <= 0 {
		limit = 100
	}
	r.mu.Lock()
	out := []RecipientCount{}
	for to, c := range r.counts {
		if c >= minCount {
			out = append(out, RecipientCount{To: to, Count: c})
		}
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].To < out[j].To
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.ring)
	r.next, r.n = 0, 0
	r.counts = map[string]int64{}
	r.accepted, r.untracked, r.duplicates, r.maxCount = 0, 0, 0, 0
	r.secs = [rateWindow + 2]struct{ sec, n int64 }{}
	r.since = time.Now()
}

// counters are the statistics outside the recorder's lock.
type counters struct {
	requests     atomic.Int64
	hung         atomic.Int64
	other        atomic.Int64
	sessions     atomic.Int64
	windowClosed atomic.Int64
	inbound      atomic.Int64
	// marketingDeclined and limitRefused count the template sends failed
	// by the per-user marketing limit and refused past a portfolio's
	// messaging limit.
	marketingDeclined atomic.Int64
	limitRefused      atomic.Int64
	byCode            map[int]*atomic.Int64 // fixed keys: read without a lock
}

// codesAnswered are the error codes the simulator can answer.
var codesAnswered = []int{100, 190, 130429, 131000, 131008, 131009, 131016, 131047, 131048, 131049, 131050, 131056, 132000, 132001, 132012, 132015, 132016}

func (c *counters) init() {
	c.byCode = make(map[int]*atomic.Int64, len(codesAnswered))
	for _, code := range codesAnswered {
		c.byCode[code] = new(atomic.Int64)
	}
}

func (c *counters) error(code int) {
	if n, ok := c.byCode[code]; ok {
		n.Add(1)
		return
	}
	c.other.Add(1)
}

func (c *counters) reset() {
	c.requests.Store(0)
	c.hung.Store(0)
	c.other.Store(0)
	c.sessions.Store(0)
	c.windowClosed.Store(0)
	c.inbound.Store(0)
	c.marketingDeclined.Store(0)
	c.limitRefused.Store(0)
	for _, n := range c.byCode {
		n.Store(0)
	}
}

// Stats are the totals since the start or the last Reset.
type Stats struct {
	Since time.Time `json:"since"`
	// Requests is every send request; Accepted those answered 200, of
	// which Sessions were session messages.
	Requests int64 `json:"requests"`
	Accepted int64 `json:"accepted"`
	Sessions int64 `json:"sessions"`
	// WindowClosed counts session messages refused because the user's
	// customer service window was closed (131047, by status or answer).
	WindowClosed int64 `json:"window_closed"`
	// Inbound counts the user messages played (POST /_sim/replies).
	Inbound int64 `json:"inbound"`
	// MessagingLimitRefused counts the template sends refused because
	// their portfolio had reached its messaging limit (by status or
	// answer); MarketingLimitDeclined those failed with 131049 by the
	// per-user marketing limit.
	MessagingLimitRefused  int64 `json:"messaging_limit_refused"`
	MarketingLimitDeclined int64 `json:"marketing_limit_declined"`
	// Windows is the number of (number, user) service windows remembered;
	// UntrackedWindows the user messages past the MaxRecipients cap, whose
	// windows were not remembered.
	Windows          int   `json:"windows"`
	UntrackedWindows int64 `json:"untracked_windows"`
	// Errors counts error answers by code ("other" for the rest).
	Errors map[string]int64 `json:"errors"`
	// Hung counts requests held without an answer (TimeoutRate).
	Hung int64 `json:"hung"`
	// AcceptedPerSecond is the mean since Since; RecentPerSecond the mean
	// of the last few whole seconds.
	AcceptedPerSecond float64 `json:"accepted_per_second"`
	RecentPerSecond   float64 `json:"recent_per_second"`
	// Recipients is the number of distinct recipients counted;
	// DuplicateRecipients those with more than one accepted send;
	// MaxPerRecipient the highest count; UntrackedSends the sends to
	// recipients past the MaxRecipients cap (not counted per recipient).
	Recipients          int   `json:"recipients"`
	DuplicateRecipients int64 `json:"duplicate_recipients"`
	MaxPerRecipient     int64 `json:"max_per_recipient"`
	UntrackedSends      int64 `json:"untracked_sends"`
	// Buffered is the number of messages kept for inspection.
	Buffered  int           `json:"buffered"`
	Callbacks CallbackStats `json:"callbacks"`
	// AccountWebhooks are the template and messaging limit webhooks.
	AccountWebhooks AccountWebhookStats `json:"account_webhooks"`
	Caps            Caps                `json:"caps"`
}

// CallbackStats count the status webhooks.
type CallbackStats struct {
	// Queued is how many statuses wait now.
	Queued int `json:"queued"`
	// Posts and FailedPosts count the POSTs; Statuses the statuses that
	// reached the receiver.
	Posts       int64 `json:"posts"`
	FailedPosts int64 `json:"failed_posts"`
	Statuses    int64 `json:"statuses"`
	// DroppedQueueFull are statuses not queued because the queue was full;
	// DroppedGaveUp those whose POST failed MaxAttempts times.
	DroppedQueueFull int64 `json:"dropped_queue_full"`
	DroppedGaveUp    int64 `json:"dropped_gave_up"`
}

// Caps are the memory bounds in force.
type Caps struct {
	MessageBuffer int `json:"message_buffer"`
	MaxRecipients int `json:"max_recipients"`
	CallbackQueue int `json:"callback_queue"`
}

// Stats returns the totals since the start or the last Reset.
func (s *Sim) Stats() Stats {
	now := time.Now()
	st := Stats{
		Requests:     s.counts.requests.Load(),
		Sessions:     s.counts.sessions.Load(),
		WindowClosed: s.counts.windowClosed.Load(),
		Inbound:      s.counts.inbound.Load(),
		Hung:         s.counts.hung.Load(),
		Errors:       map[string]int64{},
		Caps: Caps{
			MessageBuffer: s.cfg.MessageBuffer,
			MaxRecipients: s.cfg.MaxRecipients,
			CallbackQueue: s.cfg.Callbacks.QueueSize,
		},
		Callbacks:              s.cb.stats(),
		AccountWebhooks:        s.notes.stats(),
		MessagingLimitRefused:  s.counts.limitRefused.Load(),
		MarketingLimitDeclined: s.counts.marketingDeclined.Load(),
	}
	st.Windows, st.UntrackedWindows = s.windows.stats()
	for code, n := range s.counts.byCode {
		if v := n.Load(); v > 0 {
			st.Errors[strconv.Itoa(code)] = v
		}
	}
	if v := s.counts.other.Load(); v > 0 {
		st.Errors["other"] = v
	}
	r := s.rec
	r.mu.Lock()
	st.Since = r.since
	st.Accepted = r.accepted
	st.Recipients = len(r.counts)
	st.DuplicateRecipients = r.duplicates
	st.MaxPerRecipient = r.maxCount
	st.UntrackedSends = r.untracked
	st.Buffered = r.n
	var recent int64
	cur := now.Unix()
	for _, b := range r.secs {
		if b.sec >= cur-rateWindow && b.sec < cur {
			recent += b.n
		}
	}
	r.mu.Unlock()
	if el := now.Sub(st.Since).Seconds(); el > 0 {
		st.AcceptedPerSecond = float64(st.Accepted) / el
	}
	st.RecentPerSecond = float64(recent) / rateWindow
	return st
}

// Messages returns the newest received messages that match f, oldest first.
func (s *Sim) Messages(f Filter) []Received { return s.rec.messages(f) }

// SendCount is how many accepted sends went to one recipient (digits, a
// leading '+' is ignored).
func (s *Sim) SendCount(to string) int64 { return s.rec.count(to) }

// SendCounts is SendCount of each recipient, in the order given (under one
// lock, so that the counts are of one moment).
func (s *Sim) SendCounts(tos []string) []RecipientCount { return s.rec.countsOf(tos) }

// Recipients lists the recipients with at least minCount accepted sends,
// the most sent to first, at most limit (0 means 100) of them.
func (s *Sim) Recipients(minCount int64, limit int) []RecipientCount {
	return s.rec.recipients(minCount, limit)
}
