package delivery

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/parleyhq/parley/pkg/backoff"
	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/pkg/store"
)

// Deps are what a dispatcher runs on.
type Deps struct {
	Pool *pgxpool.Pool
	// JS and Bus name the SENDS stream the batches come from.
	JS       jetstream.JetStream
	Bus      bus.Config
	Catalog  Catalog
	Sender   whatsapp.Sender
	Throttle Throttle
	// Clock is time.Now when nil.
	Clock Clock
	// ProviderTimeout bounds one provider call (whatsapp.DefaultTimeout
	// when zero): a claim is not sent once it is too old to be recorded
	// within the lease after the longest call.
	ProviderTimeout time.Duration
	Log             *zap.Logger
	Registry        prometheus.Registerer
	// Pacer keeps WhatsApp's pair rate, messaging limit and marketing
	// pauses across replicas (ratelimit.Pacer); nil turns them off.
	Pacer Pacer
	// SyncTemplates reads every WABA's templates from the provider and
	// applies what its webhooks missed (waba.SyncTemplates); the campaign
	// lane runs it every Config.TemplateSyncInterval, one process of the
	// fleet at a time (Pacer.Once). Nil: never.
	SyncTemplates func(ctx context.Context) (changed int, err error)
}

// Dispatcher consumes one lane's batches from the SENDS stream, expands
// them, and sends their messages. Any number of dispatchers of a lane may
// run against the same stream and database.
type Dispatcher struct {
	lane record.Lane
	cfg  Config
	d    Deps
	exp  *Expander
	eng  *engine
	m    *Metrics
	log  *zap.Logger
}

// ConsumerName is the durable consumer of a lane on the SENDS stream.
func ConsumerName(lane record.Lane) string { return string(lane) + "-dispatcher" }

// BatchConsumerName is the campaign lane's second durable consumer, for
// message batches (batch and connector sends): NATS 2.9 consumers take one
// filter subject.
const BatchConsumerName = "campaign-dispatcher-batch"

// ReplyConsumerName is the automation lane's second durable consumer, for
// the replies of POST /api/messages (bus.Config.ReplyFilter).
const ReplyConsumerName = "automation-dispatcher-reply"

// New returns a dispatcher of lane.
func New(lane record.Lane, cfg Config, d Deps) (*Dispatcher, error) {
	if lane != record.LaneCampaign && lane != record.LaneAutomation {
		return nil, fmt.Errorf("dispatcher lane %q", lane)
	}
	if d.Pool == nil || d.JS == nil || d.Catalog == nil || d.Sender == nil || d.Throttle == nil || d.Log == nil || d.Registry == nil {
		return nil, errors.New("dispatcher: missing dependency")
	}
	if d.Clock == nil {
		d.Clock = time.Now
	}
	m, err := NewMetrics(d.Registry)
	if err != nil {
		return nil, fmt.Errorf("dispatcher metrics: %w", err)
	}
	log := d.Log.With(zap.String("lane", string(lane)))
	x := &Dispatcher{
		lane: lane, cfg: cfg, d: d, m: m, log: log,
		exp: NewExpander(d.Pool, d.Catalog, d.Clock),
		eng: newEngine(lane, cfg, d.Pool, d.Catalog, d.Sender, d.Throttle, d.ProviderTimeout, d.Clock, log, m),
	}
	x.eng.pacer, x.eng.syncTemplates = d.Pacer, d.SyncTemplates
	x.exp.eng = x.eng // fresh batches hand their first messages over (handoff.go)
	return x, nil
}

// Consumer is a durable consumer on the SENDS stream that a lane's
// dispatchers take batches from.
type Consumer struct {
	Name string
	// Filter is the subjects it takes.
	Filter string
}

// Consumers are the durable consumers a lane takes batches from, on the
// stream and subjects of b: its own (ConsumerName), and for the campaign
// lane the message batches' too (BatchConsumerName). It is nil for an
// unknown lane. Deployments scale each dispatcher on the lag of all of them
// (testkit/deploycheck holds deploy/k8s to this list).
func Consumers(lane record.Lane, b bus.Config) []Consumer {
	switch lane {
	case record.LaneCampaign:
		return []Consumer{{ConsumerName(lane), b.CampaignFilter()}, {BatchConsumerName, b.BatchFilter()}}
	case record.LaneAutomation:
		return []Consumer{{ConsumerName(lane), b.AutomationFilter()}, {ReplyConsumerName, b.ReplyFilter()}}
	}
	return nil
}

// consumers creates or updates the lane's durable pull consumers.
func (x *Dispatcher) consumers(ctx context.Context) ([]jetstream.Consumer, error) {
	var out []jetstream.Consumer
	for _, c := range Consumers(x.lane, x.d.Bus) {
		con, err := x.ensureConsumer(ctx, c.Name, c.Filter)
		if err != nil {
			return nil, err
		}
		out = append(out, con)
	}
	return out, nil
}

func (x *Dispatcher) ensureConsumer(ctx context.Context, name, filter string) (jetstream.Consumer, error) {
	c, err := x.d.JS.CreateOrUpdateConsumer(ctx, x.d.Bus.Stream, jetstream.ConsumerConfig{
		Durable:       name,
		Description:   "Parley " + string(x.lane) + " dispatchers",
		FilterSubject: filter,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       x.cfg.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: 1000,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("ensure consumer %s: %w", name, err)
	}
	return c, nil
}

// Run consumes and sends until ctx ends, then shuts down in order: stop
// taking batches (those already fetched are expanded), stop claiming, let
// the sends in flight finish and the recorder flush. It returns an error
// only when it could not start.
func (x *Dispatcher) Run(ctx context.Context) error {
	cons, err := x.consumers(ctx)
	if err != nil {
		return err
	}
	engCtx, stopEngine := context.WithCancel(context.Background())
	engDone := make(chan struct{})
	go func() {
		defer close(engDone)
		x.eng.run(engCtx)
	}()

	queue := make(chan jetstream.Msg, x.cfg.ExpandWorkers)
	quit := make(chan struct{})
	ccs, err := x.consume(ctx, cons, queue, quit)
	if err != nil {
		stopEngine()
		<-engDone
		return err
	}
	var wg sync.WaitGroup
	for range x.cfg.ExpandWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x.expandWorker(queue, quit)
		}()
	}
	x.log.Info("dispatching", zap.String("consumer", ConsumerName(x.lane)), zap.String("stream", x.d.Bus.Stream))

	<-ctx.Done()
	x.log.Info("stopping: no new batches")
	for _, cc := range ccs {
		cc.Drain()
	}
	for _, cc := range ccs {
		select {
		case <-cc.Closed():
		case <-time.After(5 * time.Second):
			cc.Stop()
		}
	}
	close(quit)
	wg.Wait()
	x.log.Info("stopping: finishing the sends in flight")
	stopEngine()
	select {
	case <-engDone:
	case <-time.After(x.cfg.ShutdownTimeout + 5*time.Second):
		x.log.Error("sends in flight did not finish in time; their claims will be sent again after the lease")
	}
	x.log.Info("stopped")
	return nil
}

// consume starts taking batches from every consumer into queue; once quit is
// closed, a batch still arriving is given back (nak).
func (x *Dispatcher) consume(ctx context.Context, cons []jetstream.Consumer, queue chan<- jetstream.Msg, quit <-chan struct{}) ([]jetstream.ConsumeContext, error) {
	var ccs []jetstream.ConsumeContext
	for _, con := range cons {
		cc, err := con.Consume(func(m jetstream.Msg) {
			select {
			case queue <- m:
			case <-quit:
				_ = m.Nak()
			}
		},
			jetstream.PullMaxMessages(2*x.cfg.ExpandWorkers),
			jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
				if ctx.Err() == nil {
					x.log.Warn("consume batches", zap.Error(err))
				}
			}))
		if err != nil {
			for _, cc := range ccs {
				cc.Stop()
			}
			return nil, fmt.Errorf("consume %s: %w", con.CachedInfo().Name, err)
		}
		ccs = append(ccs, cc)
	}
	return ccs, nil
}

// expandWorker handles batches from queue until quit is closed, then those
// still queued.
func (x *Dispatcher) expandWorker(queue <-chan jetstream.Msg, quit <-chan struct{}) {
	for {
		select {
		case m := <-queue:
			x.handle(m)
		case <-quit:
			for {
				select {
				case m := <-queue:
					x.handle(m)
				default:
					return
				}
			}
		}
	}
}

// Wake makes the dispatcher look for due messages of an account now rather
// than at its next poll.
func (x *Dispatcher) Wake(accountID int64) { x.eng.wake(accountID) }

// handle expands one stream message, a batch alone or a group of them, and
// acks it only once its messages are committed; a transient failure is
// retried with backoff, an undecodable batch is terminated (alone) or set
// aside (in a group) and kept for an operator.
func (x *Dispatcher) handle(msg jetstream.Msg) {
	lane := string(x.lane)
	defer func() {
		if r := recover(); r != nil {
			x.log.Error("panic expanding a batch", zap.Any("panic", r), zap.String("subject", msg.Subject()))
			x.m.batches.WithLabelValues(lane, "retried").Inc()
			_ = msg.NakWithDelay(5 * time.Second)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	stop := x.keepAlive(msg)
	defer stop()

	subj, subjErr := bus.ParseSubject(msg.Subject())
	if subjErr == nil && subj.Grouped {
		x.handleGroup(ctx, msg, subj)
		return
	}
	exp, batchID, err := x.expand(ctx, subj, subjErr, msg.Data())
	log := x.log.With(zap.String("batch_id", batchID), zap.Int64("company_id", subj.CompanyID))
	var rej *RejectError
	switch {
	case errors.As(err, &rej):
		x.reject(ctx, msg, rej.Reason, log)
		return
	case err != nil:
		x.retry(msg, err, log)
		return
	}
	x.expanded(exp, log)
	if err := msg.DoubleAck(ctx); err != nil {
		// The batch is committed; a redelivery finds its messages and acks.
		log.Warn("ack batch", zap.Error(err))
	}
	x.wakeFor(exp)
}

// handleGroup expands each batch of a group (bus.GroupID) as handle does a
// batch alone, a few at once, and acks the group once every batch is
// recorded or set aside. When one fails transiently the whole group is
// retried: a redelivery finds the recorded ones expanded (lockBatch) and
// skips them, as it skips a batch whose id also came alone (an
// Idempotency-Key retry).
func (x *Dispatcher) handleGroup(ctx context.Context, msg jetstream.Msg, subj bus.Subject) {
	log := x.log.With(zap.String("group", subj.Group.String()))
	batches, err := bus.DecodeGroup(msg.Data())
	if err != nil {
		x.reject(ctx, msg, err.Error(), log)
		return
	}
	type result struct {
		exp     Expansion
		batchID string
		err     error
	}
	results := make([]result, len(batches))
	sem := make(chan struct{}, x.cfg.ExpandWorkers)
	var wg sync.WaitGroup
	for i, data := range batches {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			r := &results[i]
			r.exp, r.batchID, r.err = x.expand(ctx, subj, nil, data)
		}()
	}
	wg.Wait()
	var failed error
	for i, r := range results {
		blog := log.With(zap.String("batch_id", r.batchID))
		var rej *RejectError
		switch {
		case errors.As(r.err, &rej):
			if err := x.keepRejected(ctx, msg.Subject(), r.batchID, rej.Reason, batches[i], blog); err != nil {
				failed = err
			}
		case r.err != nil:
			blog.Warn("expand batch of a group", zap.Error(r.err))
			failed = r.err
		default:
			x.expanded(r.exp, blog)
		}
	}
	if failed != nil {
		x.retry(msg, failed, log)
		return
	}
	if err := msg.DoubleAck(ctx); err != nil {
		log.Warn("ack batch group", zap.Error(err))
	}
	for _, r := range results {
		x.wakeFor(r.exp)
	}
}

// retry gives a stream message back, to come again after a backoff.
func (x *Dispatcher) retry(msg jetstream.Msg, err error, log *zap.Logger) {
	n := uint64(1)
	if md, mdErr := msg.Metadata(); mdErr == nil {
		n = md.NumDelivered
	}
	delay := backoff.Exponential(time.Second, 30*time.Second, int(min(n, 64)))
	log.Warn("expand batch; will retry", zap.Uint64("delivery", n), zap.Duration("delay", delay), zap.Error(err))
	x.m.batches.WithLabelValues(string(x.lane), "retried").Inc()
	_ = msg.NakWithDelay(delay)
}

// expanded counts an expanded batch.
func (x *Dispatcher) expanded(exp Expansion, log *zap.Logger) {
	x.m.batches.WithLabelValues(string(x.lane), exp.Result).Inc()
	if exp.Result == ResultFailed {
		log.Warn("batch could not be expanded; its messages are failed", zap.Int("messages", exp.Messages))
	}
}

// wakeFor starts the sends of an expanded batch's accounts.
func (x *Dispatcher) wakeFor(exp Expansion) {
	if exp.Due {
		x.eng.wake(exp.AccountID)
		for _, id := range exp.MoreAccounts {
			x.eng.wake(id)
		}
	}
}

// expand decodes one batch as its lane and subject say (a message batch on
// the campaign lane's batch subjects, else the lane's own) and expands it.
// subj is the subject it came on (a group's, or its own: subjErr is the
// error of parsing that).
func (x *Dispatcher) expand(ctx context.Context, subj bus.Subject, subjErr error, data []byte) (exp Expansion, batchID string, err error) {
	var b bus.BatchMessage
	var what string
	var run func() (Expansion, error)
	switch {
	case x.lane == record.LaneCampaign && subj.Kind == bus.KindMessageBatches:
		m := &sendsv1.MessageBatch{}
		b, what, run = m, "message batch", func() (Expansion, error) { return x.exp.Messages(ctx, m) }
	case x.lane == record.LaneAutomation && subj.Kind == bus.KindReplyBatches:
		m := &sendsv1.ReplyBatch{}
		b, what, run = m, "reply", func() (Expansion, error) { return x.exp.Reply(ctx, m) }
	case x.lane == record.LaneCampaign:
		m := &sendsv1.CampaignBatch{}
		b, what, run = m, "campaign batch", func() (Expansion, error) { return x.exp.Campaign(ctx, m) }
	default:
		m := &sendsv1.AutomationBatch{}
		b, what, run = m, "automation batch", func() (Expansion, error) { return x.exp.Automation(ctx, m) }
	}
	if uerr := proto.Unmarshal(data, b); uerr != nil {
		return Expansion{}, "", reject("undecodable %s: %v", what, uerr)
	}
	batchID = b.GetBatchId()
	if subjErr == nil && !publishedOnItsSubject(subj, b.GetCompanyId(), batchID) {
		if subj.Grouped {
			return Expansion{}, batchID, reject("batch %s is not of group %s", batchID, subj.Group)
		}
		return Expansion{}, batchID, reject("batch %s of company %d published on company %d's subject (batch %q)", batchID, b.GetCompanyId(), subj.CompanyID, subj.BatchID)
	}
	exp, err = run()
	return exp, batchID, err
}

// publishedOnItsSubject reports whether a batch came on its company's subject
// and, when the subject names a batch, on its own; a group's batches are
// of any company, and their ids name the group (bus.GroupOf).
func publishedOnItsSubject(s bus.Subject, companyID int64, batchID string) bool {
	if s.Grouped {
		g, _, ok := bus.GroupOf(batchID)
		return ok && g == s.Group
	}
	return s.CompanyID == companyID && (s.BatchID == "" || s.BatchID == batchID)
}

// reject terminates a stream message that can never be expanded, after
// keeping it in rejected_bus_messages; if even that fails it is retried
// later.
func (x *Dispatcher) reject(ctx context.Context, msg jetstream.Msg, reason string, log *zap.Logger) {
	if err := x.keepRejected(ctx, msg.Subject(), msg.Headers().Get("Nats-Msg-Id"), reason, msg.Data(), log); err != nil {
		x.m.batches.WithLabelValues(string(x.lane), "retried").Inc()
		_ = msg.NakWithDelay(5 * time.Second)
		return
	}
	_ = msg.Term()
}

// keepRejected keeps a batch that can never be expanded in
// rejected_bus_messages, under msgID (a group's batch: its batch id).
func (x *Dispatcher) keepRejected(ctx context.Context, subject, msgID, reason string, payload []byte, log *zap.Logger) error {
	if err := store.KeepRejected(ctx, x.d.Pool, store.RejectedMessage{
		Subject: subject, MsgID: msgID, Reason: reason, Payload: payload, RejectedAt: x.d.Clock(),
	}); err != nil {
		log.Warn("keep rejected batch; will retry", zap.Error(err))
		return err
	}
	log.Error("batch rejected", zap.String("reason", reason))
	x.m.batches.WithLabelValues(string(x.lane), "rejected").Inc()
	return nil
}

// keepAlive tells JetStream the batch is still being worked on, so that a
// long expansion (a large segment) is not redelivered to another replica.
func (x *Dispatcher) keepAlive(msg jetstream.Msg) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(x.cfg.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	return func() { close(done) }
}
