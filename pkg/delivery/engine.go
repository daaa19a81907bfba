package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/backoff"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/ops"
	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/pkg/ttlcache"
)

// engine is the sending side of a dispatcher for one lane: a lane worker
// per messaging account with due work, a bounded pool of provider calls,
// and the recorder.
type engine struct {
	lane     record.Lane
	cfg      Config
	pool     *pgxpool.Pool
	cache    *catalogCache
	sender   whatsapp.Sender
	throttle Throttle
	now      Clock
	log      *zap.Logger
	m        *Metrics
	rec      *recorder
	slots    chan struct{}
	// sendCtx outlives shutdown: in-flight provider calls finish.
	sendCtx context.Context
	// callTimeout bounds one provider call (Deps.ProviderTimeout).
	callTimeout time.Duration

	mu      sync.Mutex
	warner  *ops.Warner
	runCtx  context.Context
	workers map[int64]*laneWorker
	// pending are the messages hand-offs claimed, by account, waiting for
	// the account's lane worker; handed counts them and the reservations
	// not yet filled (handoff.go).
	pending map[int64][]record.Claimed
	handed  int
	checked map[int64]checkedBatch
	wg      sync.WaitGroup
	sends   sync.WaitGroup
	// jobs hands a message to an idle sender goroutine (sendLoop);
	// senders counts those goroutines, and stopped, closed once no send
	// can start, ends the idle ones.
	jobs    chan sendJob
	senders sync.WaitGroup
	stopped chan struct{}

	// pacer keeps WhatsApp's pair rate, messaging limit and marketing
	// pauses (rules.go); nil turns them off.
	pacer      Pacer
	portfolios *ttlcache.Cache[int64, portfolio]
	pauseMu    sync.Mutex
	pauses     map[int64]marketingPause
	// refusals is what the provider's refusals said about a template
	// version (templateRefused): its status, until the change is read back.
	refusals map[templateVersion]string
	// syncTemplates is Deps.SyncTemplates; lastSync when this process
	// last tried it.
	syncTemplates func(ctx context.Context) (int, error)
	lastSync      time.Time
	// lastKeep is when this process last ran record.KeepRecord.
	lastKeep time.Time
}

type laneWorker struct {
	woken bool
}

func newEngine(lane record.Lane, cfg Config, pool *pgxpool.Pool, cat Catalog, sender whatsapp.Sender, throttle Throttle,
	callTimeout time.Duration, now Clock, log *zap.Logger, m *Metrics) *engine {
	if callTimeout <= 0 {
		callTimeout = whatsapp.DefaultTimeout
	}
	e := &engine{callTimeout: callTimeout,
		lane: lane, cfg: cfg, pool: pool, cache: newCatalogCache(cat, cfg.CacheTTL), sender: sender,
		throttle: throttle, now: now, log: log, m: m,
		rec:      newRecorder(lane, pool, now, log, m, cfg),
		slots:    make(chan struct{}, cfg.Workers),
		jobs:     make(chan sendJob),
		stopped:  make(chan struct{}),
		sendCtx:  context.Background(),
		workers:  map[int64]*laneWorker{},
		pending:  map[int64][]record.Claimed{},
		checked:  map[int64]checkedBatch{},
		warner:   ops.NewWarner(log, warnInterval),
		pauses:   map[int64]marketingPause{},
		refusals: map[templateVersion]string{},
	}
	e.portfolios = newPortfolioCache(pool, cfg.CacheTTL)
	return e
}

// warnInterval is how often one kind of recurring failure is logged: an
// outage of PostgreSQL makes every poll fail, and one line per interval
// says as much as four a second.
const warnInterval = 10 * time.Second

// warn logs a recurring failure at most once per warnInterval per message.
func (e *engine) warn(msg string, fields ...zap.Field) { e.warner.Warn(msg, fields...) }

// run discovers accounts with due work, returns stale claims and applies
// early status callbacks until ctx ends; then it stops claiming, lets the
// sends in flight finish and the recorder flush, and returns.
func (e *engine) run(ctx context.Context) {
	e.mu.Lock()
	e.runCtx = ctx
	e.mu.Unlock()
	e.rec.run()

	poll := time.NewTicker(e.cfg.PollInterval)
	defer poll.Stop()
	sweep := time.NewTicker(e.cfg.SweepInterval)
	defer sweep.Stop()
	e.discover(ctx)
	e.sweep(ctx)
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-poll.C:
			e.discover(ctx)
		case <-sweep.C:
			e.sweep(ctx)
		}
	}
	e.wg.Wait()
	e.sends.Wait()
	close(e.stopped)
	e.senders.Wait()
	e.giveBack(0)
	e.rec.close()
}

// wake makes sure a lane worker serves the account now.
func (e *engine) wake(accountID int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.runCtx == nil || e.runCtx.Err() != nil {
		return
	}
	if w := e.workers[accountID]; w != nil {
		w.woken = true
		return
	}
	w := &laneWorker{}
	e.workers[accountID] = w
	e.wg.Add(1)
	go e.work(e.runCtx, accountID, w)
}

func (e *engine) discover(ctx context.Context) {
	// Accounts with handed-off messages first: their worker may have
	// retired on an error (handoff.go), and they need no query.
	e.mu.Lock()
	handed := make([]int64, 0, len(e.pending))
	for id := range e.pending {
		handed = append(handed, id)
	}
	e.mu.Unlock()
	for _, id := range handed {
		e.wake(id)
	}
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ids, err := record.DueAccounts(qctx, e.pool, e.lane, e.now())
	if err != nil {
		if ctx.Err() == nil {
			e.warn("find accounts with due messages", zap.Error(err))
		}
		return
	}
	for _, id := range ids {
		e.wake(id)
	}
}

// foldLimit is the most report counters one fold moves; a sweep folds
// again while a fold moves that many, up to foldRounds times.
const (
	foldLimit  = 20000
	foldRounds = 10
)

// sweep returns stale claims, applies early status callbacks, sends again
// the messages the messaging limit held once room came, folds the report
// counters and updates the backlog gauge.
func (e *engine) sweep(ctx context.Context) {
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	now := e.now()
	n, err := record.ReturnStale(qctx, e.pool, e.lane, now, now.Add(-e.cfg.Lease), e.cfg.MaxAttempts)
	if err != nil && ctx.Err() == nil {
		e.warn("sweep", zap.Error(err))
	}
	if n > 0 {
		e.m.leaseReclaims.WithLabelValues(string(e.lane)).Add(float64(n))
		e.log.Warn("returned stale claims to the queue", zap.Int("messages", n), zap.Duration("lease", e.cfg.Lease))
	}
	if _, _, err := record.SweepBacklog(qctx, e.pool, now); err != nil && ctx.Err() == nil {
		e.warn("sweep status backlog", zap.Error(err))
	}
	e.syncDue(ctx, now)
	e.keepRecordDue(ctx, now)
	if n, err := record.ReleaseDueHolds(qctx, e.pool, now, e.cfg.MarketingLimitRetry); err != nil && ctx.Err() == nil {
		e.warn("release held messages", zap.Error(err))
	} else if n > 0 {
		e.m.heldReleased.Add(float64(n))
		e.log.Info("messaging limit: room came for held messages", zap.Int("messages", n))
	}
	for i := 0; i < foldRounds; i++ {
		res, err := record.FoldReports(qctx, e.pool, foldLimit)
		if err != nil && ctx.Err() == nil {
			e.warn("fold report counters", zap.Error(err))
		}
		e.m.reportFolded.Add(float64(res.Folded))
		if err != nil || res.Busy || res.Folded < foldLimit {
			break
		}
	}
	if pending, err := record.PendingReportDeltas(qctx, e.pool); err == nil {
		e.m.reportPending.Set(float64(pending))
	}
	if waiting, err := record.Waiting(qctx, e.pool, e.lane); err == nil {
		e.m.backlog.WithLabelValues(string(e.lane)).Set(float64(waiting))
	}
}

// work serves one account until it has nothing due (or ctx ends).
func (e *engine) work(ctx context.Context, accountID int64, w *laneWorker) {
	defer e.wg.Done()
	for {
		e.mu.Lock()
		w.woken = false
		e.mu.Unlock()
		more, err := e.step(ctx, accountID)
		if ctx.Err() != nil {
			e.retire(accountID, w, true)
			return
		}
		if err != nil {
			e.warn("lane worker", zap.Int64("account_id", accountID), zap.Error(err))
			// Retire; discovery brings the account back on its next poll.
			e.retire(accountID, w, true)
			return
		}
		if !more && e.retire(accountID, w, false) {
			return
		}
	}
}

// retire removes the worker unless it was woken since its last claim began
// (then new work may have arrived that its claim did not see).
func (e *engine) retire(accountID int64, w *laneWorker, force bool) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if w.woken && !force {
		return false
	}
	if e.workers[accountID] == w {
		delete(e.workers, accountID)
	}
	return true
}

// acquire takes between 1 and n send slots, waiting for the first.
func (e *engine) acquire(ctx context.Context, n int) int {
	select {
	case e.slots <- struct{}{}:
	case <-ctx.Done():
		return 0
	}
	got := 1
	for got < n {
		select {
		case e.slots <- struct{}{}:
			got++
		default:
			return got
		}
	}
	return got
}

func (e *engine) release(n int) {
	for range n {
		<-e.slots
	}
}

// step claims and dispatches one round of an account's due messages. more
// is whether the claim was full (there may be more due).
func (e *engine) step(ctx context.Context, accountID int64) (more bool, err error) {
	acct, err := e.cache.account(ctx, accountID)
	if err != nil {
		return false, err
	}
	now := e.now()
	closed := false
	if e.lane == record.LaneCampaign && acct.Window != nil {
		open, next := NextOpening(acct.Window, e.cache.location(acct.Timezone), now)
		if !open {
			closed = true
			e.giveBack(accountID)
			n, err := record.Defer(ctx, e.pool, accountID, now, next)
			if err != nil {
				return false, err
			}
			if n > 0 {
				e.m.messages.WithLabelValues(string(e.lane), "deferred").Add(float64(n))
				e.log.Info("outside delivery hours: messages deferred", zap.Int64("account_id", accountID),
					zap.Int64("messages", n), zap.Time("until", next))
			}
		}
	}
	if e.marketingPaused(ctx, acct) {
		e.giveBack(accountID)
		return false, nil
	}
	want := min(max(acct.ThroughputPerSecond/10, 1), e.cfg.ClaimBatch)
	slots := e.acquire(ctx, want)
	if slots == 0 {
		return false, ctx.Err()
	}
	// Messages a hand-off claimed go first; then a claim. The claim is not
	// cancelled by shutdown: a claim the database made must reach this
	// process, which then sends or releases its rows, rather than leave
	// them to the lease.
	msgs, handed, err := e.takeHanded(ctx, accountID, slots, want)
	if err != nil {
		e.release(slots)
		return false, err
	}
	if !handed {
		msgs, err = e.claim(context.WithoutCancel(ctx), accountID, slots, e.now(), closed)
		if err != nil {
			e.release(slots)
			return false, err
		}
		e.m.claimSize.WithLabelValues(string(e.lane)).Observe(float64(len(msgs)))
	}
	send := msgs[:0:0]
	for _, m := range msgs {
		if m.State == record.StateSkippedOptOut {
			e.m.messages.WithLabelValues(string(e.lane), string(record.StateSkippedOptOut)).Inc()
			e.rec.add(record.Outcome{Kind: record.OutcomeTouch, BatchID: m.BatchID})
			continue
		}
		send = append(send, m)
	}
	e.release(slots - len(send))
	if len(send) == 0 {
		return handed || len(msgs) == slots, nil
	}
	if !acct.Connected {
		at := e.now()
		for _, m := range send {
			e.rec.add(record.Outcome{Kind: record.OutcomeFailed, ID: m.ID, BatchID: m.BatchID, ClaimedAt: m.ClaimedAt, At: at,
				Title: fmt.Sprintf("messaging account %d is disconnected", acct.ID)})
		}
		e.release(len(send))
		return handed || len(msgs) == slots, nil
	}
	if send = e.applyRules(ctx, acct, send); len(send) > 0 {
		e.dispatch(ctx, acct, send)
	}
	return handed || len(msgs) == slots, nil
}

func (e *engine) claim(ctx context.Context, accountID int64, n int, now time.Time, closed bool) ([]record.Claimed, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return record.Claim(ctx, e.pool, e.lane, accountID, n, now, closed)
}

// throttleKey is the throughput limiter's key of an account, shared by both
// lanes and every replica: the provider's limit is per phone number. It
// carries the company's hash tag, so that in a Redis Cluster it sits in the
// slot of the company's request limits.
func throttleKey(acct catalog.MessagingAccount) string {
	return ratelimit.CompanyKey(acct.CompanyID, "account:"+strconv.FormatInt(acct.ID, 10))
}

// dispatch waits for the account's throughput tokens and starts each send
// as its token comes. On shutdown the messages not started go back to the
// queue untouched.
func (e *engine) dispatch(ctx context.Context, acct catalog.MessagingAccount, msgs []record.Claimed) {
	left, _ := e.throttle.WaitEach(ctx, throttleKey(acct), acct.ThroughputPerSecond, len(msgs), func(granted int) {
		paused := e.pausedNow(acct)
		for _, m := range msgs[:granted] {
			if o, refused := e.refusedOutcome(m); refused {
				// Its template was refused since the claim was checked.
				e.rec.add(o)
				e.release(1)
				continue
			}
			if e.fresh(m) && !paused {
				e.launch(acct, m)
				continue
			}
			e.unsent(m)
			e.release(1)
		}
		msgs = msgs[granted:]
	})
	if left == 0 {
		return
	}
	e.unsent(msgs...)
	e.release(len(msgs))
}

// unsent gives claims that were never sent back to the queue, due at once,
// no attempt spent (the recorder's release).
func (e *engine) unsent(msgs ...record.Claimed) {
	at := e.now()
	for _, m := range msgs {
		e.rec.add(record.Outcome{Kind: record.OutcomeRelease, ID: m.ID, BatchID: m.BatchID, ClaimedAt: m.ClaimedAt, NotBefore: at, At: at})
	}
}

// fresh reports whether a claim is young enough to be sent: its outcome,
// after the longest provider call and a flush, must be recorded before
// the lease could give the message to another dispatcher. A lane worker's
// claims start at once; a hand-off's may wait for a slot (handoff.go). A
// claim too old goes back to the queue unsent.
func (e *engine) fresh(m record.Claimed) bool {
	return e.now().Sub(m.ClaimedAt) < e.sendWithin()
}

// sendWithin is how long after its claim a message may still be sent.
func (e *engine) sendWithin() time.Duration {
	within := e.cfg.Lease - e.callTimeout - e.cfg.FlushInterval - time.Second/2
	if within <= 0 {
		// A configuration Config.Validate refuses (tests build their own).
		within = e.cfg.Lease / 2
	}
	return within
}

func (e *engine) launch(acct catalog.MessagingAccount, m record.Claimed) {
	e.sends.Add(1)
	e.m.inFlight.WithLabelValues(string(e.lane)).Inc()
	j := sendJob{acct: acct, m: m}
	select {
	case e.jobs <- j: // an idle sender takes it
	default:
		e.senders.Add(1)
		go e.sendLoop(j)
	}
}

// sendJob is a claimed message for a sender goroutine.
type sendJob struct {
	acct catalog.MessagingAccount
	m    record.Claimed
}

// senderIdle is how long a sender goroutine waits for its next message
// before it exits.
const senderIdle = 5 * time.Second

// sendLoop sends j, then the messages launch gives it while it keeps
// getting one within senderIdle, until the engine stops. A sender lives
// for many messages so that a provider call runs on a stack that has grown
// to what the call needs once: a goroutine per message grew (copied) a
// fresh stack on every send (runtime.morestack: 8% of the process's CPU
// in a profile of make bench-delivery-floor, 3% with senders that stay).
// One sender runs per send slot in use (Config.Workers at most), plus the
// idle ones, each gone after senderIdle without a message.
func (e *engine) sendLoop(j sendJob) {
	defer e.senders.Done()
	idle := time.NewTimer(senderIdle)
	defer idle.Stop()
	for {
		o := e.send(j.acct, j.m)
		e.rec.add(o)
		e.m.inFlight.WithLabelValues(string(e.lane)).Dec()
		<-e.slots
		e.sends.Done()
		idle.Reset(senderIdle)
		select {
		case j = <-e.jobs:
		case <-idle.C:
			return
		case <-e.stopped:
			return
		}
	}
}

// recipient is the contact as this message personalises it: the trigger's
// names and variables over the contact record's.
func recipient(m record.Claimed) (whatsapp.Recipient, whatsapp.Overrides) {
	vars := make(map[string]string, len(m.Variables)+len(m.Overrides.Variables))
	for k, v := range m.Variables {
		vars[k] = v
	}
	for k, v := range m.Overrides.Variables {
		vars[k] = v
	}
	r := whatsapp.Recipient{Phone: m.Phone, FirstName: m.FirstName, LastName: m.LastName, Variables: vars,
		ImageURL: m.Overrides.ImageURL, VideoURL: m.Overrides.VideoURL}
	if m.Overrides.FirstName != "" {
		r.FirstName = m.Overrides.FirstName
	}
	if m.Overrides.LastName != "" {
		r.LastName = m.Overrides.LastName
	}
	return r, whatsapp.Overrides{URL: m.Overrides.URL, URL2: m.Overrides.URL2}
}

func (e *engine) send(acct catalog.MessagingAccount, m record.Claimed) record.Outcome {
	ctx := e.sendCtx
	o := record.Outcome{ID: m.ID, BatchID: m.BatchID, ClaimedAt: m.ClaimedAt, TemplateID: m.TemplateID}
	tok, err := e.cache.token(ctx, acct.ID)
	if err != nil {
		return e.failure(o, m, fmt.Errorf("load access token: %w", err))
	}
	wa := whatsapp.Account{PhoneNumberID: acct.PhoneNumberID, AccessToken: tok}
	var wamid string
	start := time.Now()
	if len(m.Content) > 0 {
		// A reply's session message, as the gateway validated it.
		var msg whatsapp.Session
		if err := json.Unmarshal(m.Content, &msg); err != nil {
			return e.failure(o, m, &whatsapp.RenderError{Part: "session message", Reason: err.Error()})
		}
		wamid, err = e.sender.SendSession(ctx, wa, m.Phone, msg)
	} else {
		tpl, terr := e.cache.template(ctx, m.TemplateID)
		if terr != nil {
			return e.failure(o, m, fmt.Errorf("load template %d: %w", m.TemplateID, terr))
		}
		to, ov := recipient(m)
		start = time.Now()
		wamid, err = e.sender.SendTemplate(ctx, wa, tpl.Template, to, ov)
	}
	e.m.sendSeconds.WithLabelValues(string(e.lane)).Observe(time.Since(start).Seconds())
	if err != nil {
		if out, ok := e.ruleFailure(acct, o, m, err); ok {
			return out
		}
		return e.failure(o, m, err)
	}
	o.Kind, o.Wamid, o.At = record.OutcomeSent, wamid, e.now()
	return o
}

// failure turns a failed attempt into a retry with backoff or, for a
// permanent error or the last attempt, a failure with the provider's code.
// A message that cannot be rendered (a missing parameter) is permanent and
// its title says which part is missing.
func (e *engine) failure(o record.Outcome, m record.Claimed, err error) record.Outcome {
	o.At = e.now()
	class := whatsapp.Classify(err)
	var floor time.Duration
	var pe *whatsapp.Error
	var re *whatsapp.RenderError
	switch {
	case errors.As(err, &pe):
		o.Code, o.Title, floor = pe.Code, pe.Title, pe.RetryAfter
		if o.Title == "" {
			o.Title = pe.Message
		}
	case errors.As(err, &re):
		o.Code, o.Title = re.ErrorCode(), re.Title()
	default:
		o.Title = err.Error()
	}
	attempt := m.Attempts + 1
	if class == whatsapp.Permanent || attempt >= e.cfg.MaxAttempts {
		o.Kind = record.OutcomeFailed
		if class != whatsapp.Permanent {
			e.log.Info("message failed after its last attempt", zap.Int64("message_id", m.ID),
				zap.Int("attempts", attempt), zap.Int("code", o.Code), zap.Stringer("class", class))
		}
		return o
	}
	o.Kind = record.OutcomeRetry
	o.NotBefore = o.At.Add(max(Backoff(e.cfg.BackoffBase, e.cfg.BackoffCap, attempt), floor))
	return o
}

// Backoff is the wait before retry number attempt (1 after the first
// failure): exponential from base, capped, with full jitter (uniform in
// [0, min(cap, base*2^(attempt-1))]) so that a burst of failures does not
// come back as a burst.
func Backoff(base, limit time.Duration, attempt int) time.Duration {
	return backoff.Jittered(base, limit, attempt)
}
