// Package sender is the webhook sender's engine: the relay that moves
// committed events from the outbox (pkg/events) to the EVENTS stream, the
// fan-out that turns each event into one delivery per subscribed endpoint
// (pkg/webhooks' webhook_deliveries), and the per-endpoint queues that post
// them, signed, as Standard Webhooks, retry them with backoff, record every
// attempt and disable endpoints that keep failing.
//
// # Durability
//
// An event is in the outbox exactly when its change is committed. The relay
// deletes outbox rows only after JetStream acked their publish (Nats-Msg-Id
// = event id, so a relay that dies between the ack and the delete
// republishes harmlessly). The fan-out acks a stream message only after its
// deliveries are committed (unique per endpoint and event, so a redelivered
// message creates none). A delivery is pending until an attempt succeeds or
// its retry period ends; a sender holds the deliveries it works on with a
// lease it renews, so the deliveries of a sender that dies are taken by
// another (or by itself restarted) when the lease ends. The only duplicates
// are the requests in flight when a sender dies, whose outcome was not
// recorded yet.
//
// # Isolation
//
// Each endpoint has its own in-memory queue (bounded: the rest waits in
// PostgreSQL) and its own workers (Config.Concurrency), and every attempt is
// bounded by Config.Timeout: a slow or hanging endpoint fills only its own
// queue.
package sender

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/ops"
	"github.com/parleyhq/parley/pkg/webhooks"
)

// ConsumerName is the durable consumer every sender replica shares on the
// EVENTS stream.
const ConsumerName = "webhook-sender"

// Deps are what the sender runs on.
type Deps struct {
	Pool     *pgxpool.Pool
	JS       jetstream.JetStream
	Store    *webhooks.Store
	Client   *http.Client
	Prefix   string
	Replicas int
	// AllowPrivate lets endpoints use http (the dialer's own check is in
	// Client).
	AllowPrivate bool
	Clock        func() time.Time
	Log          *zap.Logger
	Registry     prometheus.Registerer
}

// Sender is one webhook sender process's engine.
type Sender struct {
	cfg    Config
	pool   *pgxpool.Pool
	js     jetstream.JetStream
	store  *webhooks.Store
	client *http.Client
	prefix string
	repl   int
	allow  bool
	now    func() time.Time
	log    *zap.Logger
	m      *Metrics
	rec    *recorder

	mu       sync.Mutex
	warner   *ops.Warner
	queues   map[string]*endpointQueue
	held     map[int64]*job // by delivery id, as taken
	eps      map[string]cachedEndpoint
	subs     map[int64]cachedSubscribers
	workers  sync.WaitGroup
	inFlight sync.WaitGroup
	// sendCtx outlives Run's context, so that requests in flight finish;
	// abortSends ends it ShutdownTimeout after, so that a hanging endpoint
	// cannot hold the shutdown longer.
	sendCtx    context.Context
	abortSends context.CancelFunc
	runCtx     context.Context
}

// New builds a sender.
func New(cfg Config, d Deps) (*Sender, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := NewMetrics(d.Registry)
	if err != nil {
		return nil, fmt.Errorf("webhook sender metrics: %w", err)
	}
	now := d.Clock
	if now == nil {
		now = time.Now
	}
	replicas := d.Replicas
	if replicas == 0 {
		replicas = 1
	}
	s := &Sender{cfg: cfg, pool: d.Pool, js: d.JS, store: d.Store, client: d.Client, prefix: d.Prefix, repl: replicas,
		allow: d.AllowPrivate, now: now, log: d.Log, m: m,
		warner: ops.NewWarner(d.Log, warnInterval), queues: map[string]*endpointQueue{}, held: map[int64]*job{},
		eps: map[string]cachedEndpoint{}, subs: map[int64]cachedSubscribers{}}
	s.sendCtx, s.abortSends = context.WithCancel(context.Background())
	s.rec = newRecorder(s)
	return s, nil
}

// warnInterval is how often one kind of recurring failure is logged.
const warnInterval = 10 * time.Second

// warn logs a recurring failure at most once per warnInterval per message.
func (s *Sender) warn(msg string, fields ...zap.Field) { s.warner.Warn(msg, fields...) }

// Run relays, fans out and sends until ctx ends; then it stops taking
// events and deliveries, lets the requests in flight finish and their
// outcomes be recorded (requests still running ShutdownTimeout after ctx
// ended are aborted, and recorded as failed attempts to retry), and hands
// the deliveries it held but did not send back to the table.
func (s *Sender) Run(ctx context.Context) error {
	// Before the first delivery: its week's partition exists.
	s.keepDeliveries(ctx)
	if _, err := EnsureStream(ctx, s.js, s.cfg.Stream, s.prefix, s.repl); err != nil {
		return err
	}
	cons, err := s.js.CreateOrUpdateConsumer(ctx, s.cfg.Stream, jetstream.ConsumerConfig{
		Durable:       ConsumerName,
		Description:   "The webhook sender: one delivery per subscribed endpoint per event",
		FilterSubject: Filter(s.prefix),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       s.cfg.AckWait,
		MaxAckPending: 4 * s.cfg.FetchBatch,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("consumer %s: %w", ConsumerName, err)
	}
	s.mu.Lock()
	s.runCtx = ctx
	s.mu.Unlock()
	s.rec.run()

	incoming := make(chan jetstream.Msg, 2*s.cfg.FetchBatch)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		select {
		case incoming <- m:
		case <-ctx.Done(): // not acked: redelivered
		}
	},
		jetstream.PullMaxMessages(s.cfg.FetchBatch),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if ctx.Err() == nil {
				s.warn("consume events", zap.Error(err))
			}
		}))
	if err != nil {
		return fmt.Errorf("consume %s: %w", ConsumerName, err)
	}
	var loops sync.WaitGroup
	run := func(n int, loop func(context.Context)) {
		for range n {
			loops.Add(1)
			go func() {
				defer loops.Done()
				loop(ctx)
			}()
		}
	}
	run(s.cfg.Relays, s.relay)
	run(s.cfg.Fanouts, func(ctx context.Context) { s.fanoutLoop(ctx, incoming) })
	run(1, s.poll)
	run(1, s.renew)
	run(1, s.gauges)
	run(1, s.keep)
	s.log.Info("sending webhooks", zap.String("stream", s.cfg.Stream), zap.String("consumer", ConsumerName))
	<-ctx.Done()
	abort := time.AfterFunc(s.cfg.ShutdownTimeout, s.abortSends)
	defer abort.Stop()
	cc.Stop()
	loops.Wait()
	s.workers.Wait()
	s.inFlight.Wait()
	s.rec.close()
	s.releaseHeld()
	return nil
}

func (s *Sender) unhold(ids ...int64) {
	s.mu.Lock()
	for _, id := range ids {
		delete(s.held, id)
	}
	s.mu.Unlock()
}

// releaseHeld hands the deliveries held but not sent back at shutdown:
// due at once, for another sender.
func (s *Sender) releaseHeld() {
	s.mu.Lock()
	jobs := make([]*job, 0, len(s.held))
	for _, j := range s.held {
		jobs = append(jobs, j)
	}
	s.held = map[int64]*job{}
	s.mu.Unlock()
	if len(jobs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	slices.SortFunc(jobs, func(a, b *job) int { return cmp.Compare(a.id, b.id) })
	ids, weeks := keys(jobs)
	if _, err := s.pool.Exec(ctx, handBackSQL, ids, weeks, s.now()); err != nil {
		s.log.Warn("hand back held deliveries; they are taken when their lease ends", zap.Int("deliveries", len(ids)), zap.Error(err))
	}
}

// renew extends the lease of the deliveries this process holds, every
// third of the lease.
func (s *Sender) renew(ctx context.Context) {
	t := time.NewTicker(s.cfg.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		ids := make([]int64, 0, len(s.held))
		attempts := make([]int32, 0, len(s.held))
		weeks := make([]time.Time, 0, len(s.held))
		for id, j := range s.held {
			ids, attempts, weeks = append(ids, id), append(attempts, int32(j.attempts)), append(weeks, j.createdAt)
		}
		s.mu.Unlock()
		if len(ids) == 0 {
			continue
		}
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := s.pool.Exec(qctx, `
			UPDATE webhook_deliveries d SET next_attempt_at = $4
			FROM (SELECT d.id, d.created_at FROM webhook_deliveries d
				JOIN unnest($1::bigint[], $2::int[], $3::timestamptz[]) AS r(id, attempts, created_at)
				ON d.id = r.id AND d.created_at = r.created_at AND d.attempts = r.attempts AND d.status = 'pending'
				ORDER BY d.id FOR UPDATE OF d SKIP LOCKED) r
			WHERE d.id = r.id AND d.created_at = r.created_at`, ids, attempts, weeks, s.now().Add(s.cfg.Lease))
		cancel()
		if err != nil && ctx.Err() == nil {
			s.warn("renew delivery leases", zap.Error(err))
		}
	}
}

// keepInterval is how often the deliveries' weeks are created ahead and
// the expired ones dropped.
const keepInterval = 10 * time.Minute

// keep runs keepDeliveries every keepInterval until ctx ends.
func (s *Sender) keep(ctx context.Context) {
	t := time.NewTicker(keepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.keepDeliveries(ctx)
		}
	}
}

// keepDeliveries creates the deliveries' and attempts' weeks ahead and
// drops those past PARLEY_WEBHOOKS_ATTEMPT_RETENTION that hold no pending
// delivery (webhooks.KeepDeliveries). A failure is logged and left for the
// next run: a delivery whose week has no partition yet goes to the default
// one.
func (s *Sender) keepDeliveries(ctx context.Context) {
	qctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	k, err := s.store.KeepDeliveries(qctx, s.now())
	if len(k.Created) > 0 {
		s.log.Info("webhook deliveries: weeks created", zap.Strings("partitions", k.Created))
	}
	if len(k.Dropped) > 0 {
		s.log.Info("webhook deliveries: weeks past the retention dropped", zap.Strings("partitions", k.Dropped))
	}
	if len(k.Open) > 0 {
		s.warn("webhook deliveries: weeks past the retention kept, a delivery in them is pending", zap.Strings("partitions", k.Open))
	}
	if err != nil && ctx.Err() == nil {
		s.warn("keep the webhook deliveries' weeks", zap.Error(err))
	}
}

// gauges updates the age of the oldest event and delivery waiting.
func (s *Sender) gauges(ctx context.Context) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var outbox, pending *time.Time
		var n int64
		err := s.pool.QueryRow(qctx, `
			SELECT (SELECT min(created_at) FROM event_outbox),
				(SELECT min(queued_at) FROM webhook_deliveries WHERE status = 'pending'),
				(SELECT count(*) FROM webhook_deliveries WHERE status = 'pending')`).Scan(&outbox, &pending, &n)
		cancel()
		if err == nil {
			now := s.now()
			age := func(t *time.Time) float64 {
				if t == nil {
					return 0
				}
				return max(now.Sub(*t).Seconds(), 0)
			}
			s.m.oldestOutbox.Set(age(outbox))
			s.m.oldestPending.Set(age(pending))
			s.m.pending.Set(float64(n))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

var errGone = errors.New("endpoint deleted")

// cachedEndpoint is what a worker needs of an endpoint.
type cachedEndpoint struct {
	url     string
	enabled bool
	secrets [][]byte
	gone    bool
	at      time.Time
}

func (s *Sender) endpoint(ctx context.Context, id string) (cachedEndpoint, error) {
	s.mu.Lock()
	c, ok := s.eps[id]
	s.mu.Unlock()
	if ok && time.Since(c.at) < s.cfg.CacheTTL {
		if c.gone {
			return c, errGone
		}
		return c, nil
	}
	c = cachedEndpoint{at: time.Now()}
	err := s.pool.QueryRow(ctx, `SELECT url, enabled FROM webhook_endpoints WHERE id = $1`, id).Scan(&c.url, &c.enabled)
	if errors.Is(err, pgx.ErrNoRows) {
		c.gone = true
	} else if err != nil {
		return c, fmt.Errorf("load webhook endpoint %s: %w", id, err)
	} else if c.secrets, err = s.store.ActiveSecrets(ctx, id, s.now()); err != nil {
		return c, err
	}
	s.mu.Lock()
	s.eps[id] = c
	s.mu.Unlock()
	if c.gone {
		return c, errGone
	}
	return c, nil
}

func (s *Sender) forgetEndpoint(id string) {
	s.mu.Lock()
	delete(s.eps, id)
	s.mu.Unlock()
}
