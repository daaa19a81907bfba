package whatsappsim

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
)

// The business portfolio's messaging limit (Meta, "Messaging limits"):
// since October 2025 the portfolio, shared by all its numbers, may reach a
// tier's number of unique users (250, 2,000, 10,000, 100,000 or unlimited)
// with business-initiated messages outside an open customer service window
// in a moving 24 hours. The simulator counts template sends to users whose
// window on the sending number is closed; a user already reached in the
// moving 24 hours costs nothing more, and a message that is not delivered
// (131026, 131049, refused) reaches no one. Meta documents no error code for
// a send past the limit; see the README for the simulator's answer.

// MessagingLimitWindow is Meta's moving period of the messaging limit,
// scaled by Rules.TimeScale.
const MessagingLimitWindow = 24 * time.Hour

// ErrUnknownPortfolio is a portfolio none of the served numbers is in.
var ErrUnknownPortfolio = errors.New("whatsappsim: no such portfolio")

// reachSet is the users a portfolio reached, each with its last reach.
type reachSet struct {
	last map[string]int64 // unix nanoseconds
	// oldest is at most the earliest time in last: a sweep is worth it
	// only once it has left the window.
	oldest  int64
	refused int64
}

// limits holds each portfolio's tier and reach.
type limits struct {
	mu    sync.Mutex
	tiers map[string]string // absent: TIER_UNLIMITED
	reach map[string]*reachSet
	// limited maps the portfolios with a limit to it, copied on write, so
	// that a send to an unlimited portfolio takes no lock.
	limited atomicMap
}

func newLimits() *limits {
	l := &limits{tiers: map[string]string{}, reach: map[string]*reachSet{}}
	l.limited.store(map[string]int{})
	return l
}

// limit is the portfolio's number of users; 0 is unlimited.
func (l *limits) limit(portfolio string) int { return l.limited.load()[portfolio] }

func (l *limits) tier(portfolio string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.tiers[portfolio]; ok {
		return t
	}
	return whatsapp.TierUnlimited
}

// setTier records the tier and returns the one before.
func (l *limits) setTier(portfolio, tier string) string {
	n, _ := whatsapp.TierLimit(tier)
	l.mu.Lock()
	defer l.mu.Unlock()
	old, ok := l.tiers[portfolio]
	if !ok {
		old = whatsapp.TierUnlimited
	}
	next := map[string]int{}
	for k, v := range l.limited.load() {
		next[k] = v
	}
	if tier == whatsapp.TierUnlimited {
		delete(l.tiers, portfolio)
		delete(next, portfolio)
	} else {
		l.tiers[portfolio] = tier
		next[portfolio] = n
	}
	l.limited.store(next)
	return old
}

// reachUser reports whether the portfolio may reach user at now: yes for a
// user reached within the window (its reach is renewed), yes for a new one
// while fewer than limit users were reached in the window, no otherwise
// (counted).
func (l *limits) reachUser(portfolio, user string, now int64, window time.Duration, limit int) bool {
	cutoff := now - int64(window)
	l.mu.Lock()
	defer l.mu.Unlock()
	rs := l.reach[portfolio]
	if rs == nil {
		rs = &reachSet{last: map[string]int64{}}
		l.reach[portfolio] = rs
	}
	if t, ok := rs.last[user]; ok {
		if t > cutoff {
			rs.last[user] = max(t, now)
			return true
		}
		delete(rs.last, user)
	}
	if len(rs.last) >= limit && rs.oldest <= cutoff {
		rs.sweep(cutoff)
	}
	if len(rs.last) >= limit {
		rs.refused++
		return false
	}
	if len(rs.last) == 0 || now < rs.oldest {
		rs.oldest = now
	}
	rs.last[user] = now
	return true
}

func (rs *reachSet) sweep(cutoff int64) {
	oldest := int64(0)
	for u, t := range rs.last {
		if t <= cutoff {
			delete(rs.last, u)
			continue
		}
		if oldest == 0 || t < oldest {
			oldest = t
		}
	}
	rs.oldest = oldest
}

// figures are a portfolio's users reached in the window and refusals.
func (l *limits) figures(portfolio string, now int64, window time.Duration) (reached int, refused int64) {
	cutoff := now - int64(window)
	l.mu.Lock()
	defer l.mu.Unlock()
	rs := l.reach[portfolio]
	if rs == nil {
		return 0, 0
	}
	for _, t := range rs.last {
		if t > cutoff {
			reached++
		}
	}
	return reached, rs.refused
}

// reset forgets the reach and the refusals and puts every tier back to
// unlimited.
func (l *limits) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tiers = map[string]string{}
	l.reach = map[string]*reachSet{}
	l.limited.store(map[string]int{})
}

// Portfolio is a business portfolio as GET /_sim/portfolios shows it.
type Portfolio struct {
	ID string `json:"portfolio_id"`
	// Tier is TIER_250, TIER_2K, TIER_10K, TIER_100K or TIER_UNLIMITED;
	// Limit its number of users (0: unlimited).
	Tier  string `json:"tier"`
	Limit int    `json:"limit"`
	// PhoneNumberIDs are the served numbers that share the limit.
	PhoneNumberIDs []string `json:"phone_number_ids"`
	// Reached is the unique users reached outside a service window in the
	// (scaled) moving 24 hours; Refused the template sends refused past
	// the limit since the start or the last Reset.
	Reached int   `json:"reached"`
	Refused int64 `json:"refused"`
}

// Portfolios lists the portfolios of the served numbers.
func (s *Sim) Portfolios() []Portfolio {
	members := map[string][]string{}
	for _, a := range *s.accounts.Load() {
		members[a.portfolio] = append(members[a.portfolio], a.id)
	}
	window := s.rules.Load().scaled(MessagingLimitWindow)
	now := time.Now().UnixNano()
	out := make([]Portfolio, 0, len(members))
	for id, nums := range members {
		sort.Strings(nums)
		p := Portfolio{ID: id, Tier: s.limits.tier(id), PhoneNumberIDs: nums}
		p.Limit, _ = whatsapp.TierLimit(p.Tier)
		p.Reached, p.Refused = s.limits.figures(id, now, window)
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// SetPortfolioTier sets a portfolio's messaging limit tier and announces
// the change to each of its numbers with a phone_number_quality_update
// webhook (UPGRADE or DOWNGRADE, the new tier in
// whatsapp_business_manager_messaging_limit). Setting the tier it has
// changes nothing.
func (s *Sim) SetPortfolioTier(portfolioID, tier string) error {
	newLimit, ok := whatsapp.TierLimit(tier)
	if !ok {
		return fmt.Errorf("whatsappsim: tier %q: want %s, %s, %s, %s or %s", tier,
			whatsapp.Tier250, whatsapp.Tier2K, whatsapp.Tier10K, whatsapp.Tier100K, whatsapp.TierUnlimited)
	}
	var members []*account
	for _, a := range *s.accounts.Load() {
		if a.portfolio == portfolioID {
			members = append(members, a)
		}
	}
	if len(members) == 0 {
		return fmt.Errorf("%w: %s", ErrUnknownPortfolio, portfolioID)
	}
	s.tierMu.Lock()
	defer s.tierMu.Unlock()
	old := s.limits.setTier(portfolioID, tier)
	if old == tier {
		return nil
	}
	oldLimit, _ := whatsapp.TierLimit(old)
	event := "DOWNGRADE"
	if newLimit == 0 || oldLimit != 0 && newLimit > oldLimit {
		event = "UPGRADE"
	}
	sort.Slice(members, func(i, j int) bool { return members[i].id < members[j].id })
	notes := make([]accountChange, 0, len(members))
	for _, a := range members {
		notes = append(notes, accountChange{waba: a.waba, field: whatsapp.FieldPhoneNumberQuality, value: whatsapp.PhoneNumberQualityUpdate{
			DisplayPhoneNumber: a.id, Event: event, OldLimit: old, CurrentLimit: tier,
			MaxDailyConversationsPerBusiness: tier, WhatsAppBusinessManagerMessagingLimit: tier,
		}})
	}
	s.notes.send(time.Now(), notes...)
	return nil
}

func (s *Sim) handlePutPortfolio(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Tier string `json:"tier"`
	}
	if err := decodeStrict(r, &body); err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	id := r.PathValue("portfolio_id")
	if err := s.SetPortfolioTier(id, body.Tier); err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, ErrUnknownPortfolio) {
			status = http.StatusNotFound
		}
		writeDetail(w, status, err.Error())
		return
	}
	for _, p := range s.Portfolios() {
		if p.ID == id {
			writeJSON(w, http.StatusOK, p)
			return
		}
	}
}

// The per-user marketing limit (Meta, "Per-user marketing template message
// limits", error 131049): Meta declines some MARKETING template messages to
// a user who got many, and a resend within 24 hours fails again. The
// simulator declines a share of users, chosen per (user, scaled day) by a
// hash so that a run repeats, and remembers a declined user for the
// (scaled) 24 hours after the decline.

// MarketingLimitDay is Meta's 24 hours of the per-user marketing limit,
// scaled by Rules.TimeScale.
const MarketingLimitDay = 24 * time.Hour

type marketingLimit struct {
	mu       sync.Mutex
	declined map[string]int64 // user → when first declined, unix nanoseconds
	capacity int
}

func newMarketingLimit(capacity int) *marketingLimit {
	return &marketingLimit{declined: map[string]int64{}, capacity: capacity}
}

// decline reports whether a MARKETING template to user fails with 131049.
func (m *marketingLimit) decline(user string, now int64, day time.Duration, share float64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t, ok := m.declined[user]; ok {
		if now-t < int64(day) {
			return true
		}
		delete(m.declined, user)
	}
	if shareOf(user, now/int64(day)) >= share {
		return false
	}
	if len(m.declined) >= m.capacity {
		for u, t := range m.declined {
			if now-t >= int64(day) {
				delete(m.declined, u)
			}
		}
	}
	if len(m.declined) < m.capacity {
		m.declined[user] = now
	}
	return true
}

func (m *marketingLimit) reset() {
	m.mu.Lock()
	m.declined = map[string]int64{}
	m.mu.Unlock()
}

// shareOf places (user, day) uniformly in [0, 1).
func shareOf(user string, day int64) float64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(user))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(strconv.FormatInt(day, 10)))
	return float64(h.Sum64()>>11) / (1 << 53)
}

// The failed statuses of the two limits.
const (
	marketingLimitTitle   = "This message was not delivered to maintain healthy ecosystem engagement."
	marketingLimitDetails = "In order to maintain a healthy ecosystem engagement, the message failed to be delivered."
	messagingLimitTitle   = "Messaging limit reached"
	messagingLimitDetails = "The business portfolio reached its messaging limit: the unique users it may reach outside a customer service window in a moving 24 hours."
)

// errMessagingLimit is the synchronous answer past the messaging limit.
func errMessagingLimit(code int) *apiError {
	if code == codeMarketingLimit {
		return &apiError{status: 400, code: code, typ: "OAuthException",
			message: "(#131049) " + marketingLimitTitle, details: marketingLimitDetails}
	}
	return &apiError{status: 400, code: code, typ: "OAuthException",
		message: "(#" + strconv.Itoa(code) + ") " + messagingLimitTitle, details: messagingLimitDetails}
}

// atomicMap is a map replaced whole on each write and read without a lock.
type atomicMap struct {
	p atomic.Pointer[map[string]int]
}

func (a *atomicMap) load() map[string]int   { return *a.p.Load() }
func (a *atomicMap) store(m map[string]int) { a.p.Store(&m) }
