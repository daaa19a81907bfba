package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/pkg/ttlcache"
)

// WhatsApp's rules as waits, never failures (WHATSAPP.md): before a claim
// is sent, each message's template must be sendable (a PENDING or PAUSED
// template holds it, a REJECTED or DISABLED one fails it), its recipient
// must not have had a message from this number within the pair interval
// (it waits, the rest of the claim goes), and a new user must fit under the
// business portfolio's messaging limit (it is held until room comes).

// Pacer keeps the pair rate, the messaging limit and marketing pauses for
// every replica (ratelimit.Pacer).
type Pacer interface {
	Pair(ctx context.Context, companyID int64, number string, users []string, interval time.Duration) ([]time.Duration, error)
	Reach(ctx context.Context, companyID int64, portfolio string, users []string, limit int, window time.Duration,
		now time.Time) ([]time.Time, error)
	PauseMarketing(ctx context.Context, companyID int64, number string, d time.Duration) error
	MarketingPausedFor(ctx context.Context, companyID int64, number string) (time.Duration, error)
	// Once is true for the first caller of the fleet within ttl.
	Once(ctx context.Context, name string, ttl time.Duration) (bool, error)
}

// rulesTimeout bounds one rule's read (PostgreSQL or Redis) before a claim
// is sent.
const rulesTimeout = 5 * time.Second

// applyRules returns the messages of a claim that may be sent now; the
// others get their outcome (held, failed, or back to the queue when their
// pair interval ends) and their send slot back.
func (e *engine) applyRules(ctx context.Context, acct catalog.MessagingAccount, msgs []record.Claimed) []record.Claimed {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rulesTimeout)
	defer cancel()
	n := len(msgs)
	msgs = e.checkTemplates(ctx, msgs)
	msgs = e.pacePairs(ctx, acct, msgs)
	msgs = e.budget(ctx, acct, msgs)
	e.release(n - len(msgs))
	return msgs
}

// isTemplate is a template message (not a reply's session message).
func isTemplate(m record.Claimed) bool { return len(m.Content) == 0 && m.TemplateID != 0 }

// checkTemplates holds the messages whose template is PENDING or PAUSED
// and fails those whose template is REJECTED or DISABLED, as the database
// says now (one read per claim). A read that fails lets the claim go: the
// provider refuses what it must.
func (e *engine) checkTemplates(ctx context.Context, msgs []record.Claimed) []record.Claimed {
	var ids []int64
	seen := map[int64]bool{}
	for _, m := range msgs {
		if isTemplate(m) && !seen[m.TemplateID] {
			seen[m.TemplateID] = true
			ids = append(ids, m.TemplateID)
		}
	}
	if len(ids) == 0 {
		return msgs
	}
	st, err := record.TemplateStatuses(ctx, e.pool, ids)
	if err != nil {
		e.warn("template statuses unread: the claim goes as it is", zap.Error(err))
		return msgs
	}
	for id, ts := range st {
		if refused := e.refusedAs(id, ts); refused != "" {
			ts.Status, ts.Reason = refused, refusedReason
			st[id] = ts
		}
	}
	at := e.now()
	keep := msgs[:0]
	for _, m := range msgs {
		ts := st[m.TemplateID]
		if !isTemplate(m) || ts.Status == "" || ts.Status == record.TemplateApproved {
			m.TemplateSeen, m.TemplateName, m.TemplateLanguage = ts.ChangedAt, ts.Name, ts.Language
			keep = append(keep, m)
			continue
		}
		e.rec.add(templateOutcome(record.Outcome{ID: m.ID, BatchID: m.BatchID, ClaimedAt: m.ClaimedAt, At: at,
			TemplateID: m.TemplateID}, ts))
	}
	return keep
}

// templateOutcome is the outcome of a message whose template is not
// APPROVED: held while it is PENDING or PAUSED, failed naming it (132016
// or 900006, with the reason) when it is DISABLED or REJECTED.
func templateOutcome(o record.Outcome, ts record.TemplateStatus) record.Outcome {
	switch ts.Status {
	case record.TemplatePending:
		o.Kind, o.Reason = record.OutcomeHold, record.HoldTemplatePending
	case record.TemplatePaused:
		o.Kind, o.Reason = record.OutcomeHold, record.HoldTemplatePaused
	default:
		o.Kind = record.OutcomeFailed
		o.Code, o.Title = record.TemplateFailure(ts)
	}
	return o
}

// pacePairs keeps two messages from the account's number to one user the
// pair interval apart: a user reserved by an earlier send waits (back to
// the queue, due when the interval ends, no attempt spent); the others go.
// Redis unreachable: the claim goes, and the provider's 131056 is a retry.
func (e *engine) pacePairs(ctx context.Context, acct catalog.MessagingAccount, msgs []record.Claimed) []record.Claimed {
	if e.pacer == nil || e.cfg.PairInterval <= 0 || len(msgs) == 0 {
		return msgs
	}
	users := make([]string, len(msgs))
	for i, m := range msgs {
		users[i] = m.Phone
	}
	waits, err := e.pacer.Pair(ctx, acct.CompanyID, acct.PhoneNumberID, users, e.cfg.PairInterval)
	if err != nil {
		e.warn("pair rate unchecked: the claim goes as it is", zap.Error(err))
		return msgs
	}
	at := e.now()
	keep := msgs[:0]
	for i, m := range msgs {
		if waits[i] <= 0 {
			keep = append(keep, m)
			continue
		}
		e.rec.add(record.Outcome{Kind: record.OutcomeRelease, ID: m.ID, BatchID: m.BatchID, ClaimedAt: m.ClaimedAt,
			NotBefore: at.Add(waits[i]), At: at})
	}
	return keep
}

// budget counts the template messages to users without an open customer
// service window on this number against the portfolio's messaging limit;
// a new user past it is held until room comes (reason messaging_limit).
// Redis unreachable: they are held for a minute rather than refused.
func (e *engine) budget(ctx context.Context, acct catalog.MessagingAccount, msgs []record.Claimed) []record.Claimed {
	if e.pacer == nil || len(msgs) == 0 {
		return msgs
	}
	pe, _, err := e.portfolios.Get(ctx, acct.ID)
	if err != nil {
		e.warn("messaging limit unread: the claim goes as it is", zap.Error(err))
		return msgs
	}
	p := pe.Value
	if p.limit == 0 {
		return msgs
	}
	counted, err := e.outsideWindow(ctx, acct, msgs)
	if err != nil {
		e.warn("customer service windows unread: the claim goes as it is", zap.Error(err))
		return msgs
	}
	if len(counted) == 0 {
		return msgs
	}
	users := make([]string, len(counted))
	for i, k := range counted {
		users[i] = msgs[k].Phone
	}
	at := e.now()
	rooms, err := e.pacer.Reach(ctx, acct.CompanyID, p.id, users, p.limit, e.cfg.MessagingLimitWindow, at)
	if err != nil {
		e.warn("messaging limit uncounted: held for a minute", zap.Error(err))
		rooms = make([]time.Time, len(users))
		for i := range rooms {
			rooms[i] = at.Add(time.Minute)
		}
	}
	held := map[int]time.Time{}
	for i, k := range counted {
		if !rooms[i].IsZero() {
			held[k] = rooms[i]
		}
	}
	keep := msgs[:0]
	for i, m := range msgs {
		room, ok := held[i]
		if !ok {
			keep = append(keep, m)
			continue
		}
		e.rec.add(record.Outcome{Kind: record.OutcomeHold, Reason: record.HoldMessagingLimit, ID: m.ID, BatchID: m.BatchID,
			ClaimedAt: m.ClaimedAt, NotBefore: room, At: at})
	}
	return keep
}

// outsideWindow returns the indexes of msgs that count against the
// messaging limit: template messages to users whose customer service window
// on this number is closed (Meta counts no message inside an open window).
func (e *engine) outsideWindow(ctx context.Context, acct catalog.MessagingAccount, msgs []record.Claimed) ([]int, error) {
	var phones []string
	for _, m := range msgs {
		if isTemplate(m) {
			phones = append(phones, m.Phone)
		}
	}
	if len(phones) == 0 {
		return nil, nil
	}
	open, err := record.OpenWindows(ctx, e.pool, acct.ID, phones, e.now().Add(-e.cfg.ServiceWindow))
	if err != nil {
		return nil, err
	}
	var out []int
	for i, m := range msgs {
		if isTemplate(m) && !open[m.Phone] {
			out = append(out, i)
		}
	}
	return out, nil
}

// portfolio is a number's business portfolio and its messaging limit (0:
// unlimited).
type portfolio struct {
	id    string
	limit int
}

// newPortfolioCache reads each account's portfolio and limit at most once
// per ttl.
func newPortfolioCache(pool record.DB, ttl time.Duration) *ttlcache.Cache[int64, portfolio] {
	return ttlcache.New(ttlcache.Config{TTL: ttl, StaleIfError: catalogStaleIfError}, time.Now,
		func(ctx context.Context, accountID int64) (portfolio, error) {
			id, tier, err := record.AccountPortfolio(ctx, pool, accountID)
			if err != nil {
				return portfolio{}, err
			}
			limit, known := whatsapp.TierLimit(tier)
			if !known && tier != "" {
				return portfolio{}, fmt.Errorf("portfolio %s: unknown tier %q", id, tier)
			}
			return portfolio{id: id, limit: limit}, nil
		})
}

// marketingPaused reports whether the account's number has its marketing
// sends paused (131048), reading the shared pause at most once a second.
func (e *engine) marketingPaused(ctx context.Context, acct catalog.MessagingAccount) bool {
	if e.pacer == nil || e.lane != record.LaneCampaign {
		return false
	}
	e.pauseMu.Lock()
	p, ok := e.pauses[acct.ID]
	e.pauseMu.Unlock()
	now := e.now()
	if !ok || now.Sub(p.read) >= time.Second {
		left, err := e.pacer.MarketingPausedFor(ctx, acct.CompanyID, acct.PhoneNumberID)
		if err != nil {
			e.warn("marketing pause unread", zap.Error(err))
		}
		p = marketingPause{until: now.Add(left), read: now}
		e.pauseMu.Lock()
		e.pauses[acct.ID] = p
		e.pauseMu.Unlock()
	}
	paused := now.Before(p.until)
	e.m.marketingPaused.WithLabelValues(acct.PhoneNumberID).Set(boolGauge(paused))
	return paused
}

// pausedNow reports, from this process's memory only, whether the
// account's marketing sends are paused: a claim that waited for its
// throughput after a 131048 came back goes back to the queue unsent.
func (e *engine) pausedNow(acct catalog.MessagingAccount) bool {
	if e.pacer == nil || e.lane != record.LaneCampaign {
		return false
	}
	e.pauseMu.Lock()
	p := e.pauses[acct.ID]
	e.pauseMu.Unlock()
	return e.now().Before(p.until)
}

// marketingPause is a number's pause as last read.
type marketingPause struct {
	until, read time.Time
}

// pauseMarketing pauses the number's marketing sends for d, for every
// replica, after the provider's 131048.
func (e *engine) pauseMarketing(acct catalog.MessagingAccount, d time.Duration) {
	e.m.spamLimits.WithLabelValues(acct.PhoneNumberID).Inc()
	if e.pacer == nil {
		return
	}
	until := e.now().Add(d)
	ctx, cancel := context.WithTimeout(context.Background(), rulesTimeout)
	defer cancel()
	if err := e.pacer.PauseMarketing(ctx, acct.CompanyID, acct.PhoneNumberID, d); err != nil {
		e.warn("marketing pause not shared", zap.Error(err))
	}
	e.pauseMu.Lock()
	e.pauses[acct.ID] = marketingPause{until: until, read: e.now()}
	e.pauseMu.Unlock()
	e.log.Warn("spam rate limit (131048): the number's marketing sends pause", zap.Int64("account_id", acct.ID),
		zap.String("account", acct.Name), zap.Time("until", until))
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// refusedReason is the reason a template's change from a refused send
// records.
const refusedReason = "refused by the provider"

// refusedAs is the status a provider's refusal gave the template version
// ts (PAUSED or DISABLED), or "": while the change commits, and until a
// claim reads it back, the template's other messages are held or failed
// here instead of being sent to be refused too.
func (e *engine) refusedAs(id int64, ts record.TemplateStatus) string {
	if ts.Status != record.TemplateApproved {
		return ""
	}
	return e.refusal(templateVersion{id, ts.ChangedAt})
}

// refusal is the status a provider's refusal gave the template version v,
// or "".
func (e *engine) refusal(v templateVersion) string {
	e.pauseMu.Lock()
	defer e.pauseMu.Unlock()
	return e.refusals[v]
}

// refusedOutcome is the outcome of a claimed message whose template
// version a provider's refusal has since paused or disabled (refusedAs):
// held, or failed naming the template; refused is false for the others,
// which go. A claim waiting for its throughput stops at the first refusal
// instead of sending the rest of it to be refused too.
func (e *engine) refusedOutcome(m record.Claimed) (record.Outcome, bool) {
	if !isTemplate(m) {
		return record.Outcome{}, false
	}
	status := e.refusal(templateVersion{m.TemplateID, m.TemplateSeen})
	if status == "" {
		return record.Outcome{}, false
	}
	o := record.Outcome{ID: m.ID, BatchID: m.BatchID, ClaimedAt: m.ClaimedAt, At: e.now(), TemplateID: m.TemplateID}
	return templateOutcome(o, refusedTemplate(m, status)), true
}

// refusedTemplate is the template of m as a provider's refusal left it:
// named, with the refusal as its reason, as ApplyTemplateChange names it
// for the template's other messages.
func refusedTemplate(m record.Claimed, status string) record.TemplateStatus {
	return record.TemplateStatus{Status: status, Name: m.TemplateName, Language: m.TemplateLanguage, Reason: refusedReason}
}

// templateRefused records what a provider's refusal says about a template
// (132015 paused, 132016 disabled) at once, so that its other waiting
// messages are held or failed before they are claimed: once per status of
// the template version the sends saw (TemplateSeen); a DISABLED after a
// PAUSED is recorded too.
func (e *engine) templateRefused(acct catalog.MessagingAccount, m record.Claimed, status string) {
	key := templateVersion{m.TemplateID, m.TemplateSeen}
	e.pauseMu.Lock()
	if prev := e.refusals[key]; prev == status || prev == record.TemplateDisabled {
		e.pauseMu.Unlock()
		return
	}
	if len(e.refusals) > 10_000 {
		clear(e.refusals)
	}
	e.refusals[key] = status
	e.pauseMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), rulesTimeout)
	defer cancel()
	res, err := record.ApplyTemplateChange(ctx, e.pool, record.TemplateChange{CompanyID: acct.CompanyID, TemplateID: m.TemplateID,
		Status: status, Reason: refusedReason, Source: record.SourceSend, At: m.TemplateSeen})
	if err != nil {
		// Not remembered either: the next refusal tries again, and nothing
		// is held on a change that the database does not have.
		e.pauseMu.Lock()
		if e.refusals[key] == status {
			delete(e.refusals, key)
		}
		e.pauseMu.Unlock()
		e.warn("template status from a refusal not recorded", zap.Int64("template_id", m.TemplateID), zap.Error(err))
		return
	}
	if res.Changed {
		e.log.Warn("the provider refused a template: its messages wait", zap.String("template", res.Name),
			zap.String("language", res.Language), zap.String("status", status), zap.Int("held", res.Held), zap.Int("failed", res.Failed))
	}
}

// templateVersion is a template as of its last status change.
type templateVersion struct {
	template int64
	seen     time.Time
}

// syncDue runs the template sync when its interval has passed, in one
// process of the fleet (the campaign lane's sweeps race for a Redis key
// that lives for the interval).
func (e *engine) syncDue(ctx context.Context, now time.Time) {
	if e.syncTemplates == nil || e.pacer == nil || e.lane != record.LaneCampaign || now.Sub(e.lastSync) < e.cfg.TemplateSyncInterval {
		return
	}
	e.lastSync = now
	ok, err := e.pacer.Once(ctx, "template-sync", e.cfg.TemplateSyncInterval)
	if err != nil || !ok {
		if err != nil {
			e.warn("template sync not started", zap.Error(err))
		}
		return
	}
	sctx, cancel := context.WithTimeout(ctx, e.cfg.TemplateSyncInterval)
	defer cancel()
	n, err := e.syncTemplates(sctx)
	if err != nil {
		e.warn("template sync", zap.Error(err))
	}
	if n > 0 {
		e.log.Info("template sync: changes the webhooks had missed", zap.Int("templates", n))
	}
}

// keepRecordInterval is how often the campaign lane's sweeps create the
// record's weeks ahead and apply its retention.
const keepRecordInterval = time.Hour

// keepRecordDue runs record.KeepRecord at the first sweep and every
// keepRecordInterval after it (every campaign dispatcher does; the SQL
// serialises them).
func (e *engine) keepRecordDue(ctx context.Context, now time.Time) {
	if e.lane != record.LaneCampaign || !e.lastKeep.IsZero() && now.Sub(e.lastKeep) < keepRecordInterval {
		return
	}
	e.lastKeep = now
	kctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	k, err := record.KeepRecord(kctx, e.pool, now, e.cfg.MessagesRetention)
	if err != nil && ctx.Err() == nil {
		e.warn("record lifetime", zap.Error(err))
	}
	if len(k.Created) > 0 || len(k.Dropped) > 0 {
		e.log.Info("record lifetime", zap.Strings("created", k.Created), zap.Strings("dropped", k.Dropped),
			zap.Duration("retention", e.cfg.MessagesRetention))
	}
	if len(k.Open) > 0 {
		e.log.Warn("record lifetime: weeks past the retention kept, messages in them can still be sent",
			zap.Strings("weeks", k.Open))
	}
}

// The provider's answers that are WhatsApp's rules rather than errors.
const (
	codeTemplatePaused   = 132015
	codeTemplateDisabled = 132016
	codeMarketingLimit   = 131049
	codeSpamRateLimit    = 131048
)

// ruleFailure turns the provider's refusals that are WhatsApp's rules into
// waits: 132015 holds the message (its template is paused) and holds the
// template's other waiting messages; 132016 fails it and the template's
// other messages; 131049 (the user's marketing limit) is held for one
// retry after MarketingLimitRetry (ReleaseDueHolds), then fails; 131048 (spam rate limit) pauses
// the number's marketing sends for the error's floor. ok is false for any
// other error.
func (e *engine) ruleFailure(acct catalog.MessagingAccount, o record.Outcome, m record.Claimed, err error) (record.Outcome, bool) {
	var pe *whatsapp.Error
	if !errors.As(err, &pe) {
		return o, false
	}
	o.At, o.Code, o.Title = e.now(), pe.Code, pe.Title
	switch {
	case pe.Code == codeTemplatePaused && isTemplate(m):
		e.templateRefused(acct, m, record.TemplatePaused)
		o.Kind, o.Reason = record.OutcomeHold, record.HoldTemplatePaused
		return o, true
	case pe.Code == codeTemplateDisabled && isTemplate(m):
		e.templateRefused(acct, m, record.TemplateDisabled)
		// Failed as the template's other messages fail: naming it.
		o.Kind = record.OutcomeFailed
		if m.TemplateName != "" {
			o = templateOutcome(o, refusedTemplate(m, record.TemplateDisabled))
		}
		return o, true
	case pe.Code == codeMarketingLimit && m.LastCode != codeMarketingLimit:
		// Meta reports 131049 in a failed status (record.ApplyStatuses
		// holds it there); an answer that carries it is held the same way.
		o.Kind, o.Reason = record.OutcomeHold, record.HoldMarketingLimit
		return o, true
	case pe.Code == codeSpamRateLimit:
		e.pauseMarketing(acct, max(pe.RetryAfter, whatsapp.AccountFloor))
	}
	return o, false
}
