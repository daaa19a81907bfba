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

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
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
	Clock    Clock
	Log      *zap.Logger
	Registry prometheus.Registerer
}

// Dispatcher consumes one lane's batches from the SENDS stream, expands
// them, and sends their messages. Any number of dispatchers of a lane may
// run against the same stream and database.
type Dispatcher struct {
	lane Lane
	cfg  Config
	d    Deps
	exp  *Expander
	eng  *engine
	m    *Metrics
	log  *zap.Logger
}

// ConsumerName is the durable consumer of a lane on the SENDS stream.
func ConsumerName(lane Lane) string { return string(lane) + "-dispatcher" }

// BatchConsumerName is the campaign lane's second durable consumer, for
// message batches (batch and connector sends): NATS 2.9 consumers take one
// filter subject.
const BatchConsumerName = "campaign-dispatcher-batch"

// New returns a dispatcher of lane.
func New(lane Lane, cfg Config, d Deps) (*Dispatcher, error) {
	if lane != LaneCampaign && lane != LaneAutomation {
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
	return &Dispatcher{
		lane: lane, cfg: cfg, d: d, m: m, log: log,
		exp: NewExpander(d.Pool, d.Catalog, d.Clock),
		eng: newEngine(lane, cfg, d.Pool, d.Catalog, d.Sender, d.Throttle, d.Clock, log, m),
	}, nil
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
func Consumers(lane Lane, b bus.Config) []Consumer {
	switch lane {
	case LaneCampaign:
		return []Consumer{{ConsumerName(lane), b.CampaignFilter()}, {BatchConsumerName, b.BatchFilter()}}
	case LaneAutomation:
		return []Consumer{{ConsumerName(lane), b.AutomationFilter()}}
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

// handle expands one batch and acks it only once its messages are
// committed; a transient failure is retried with backoff, an undecodable
// batch is terminated and kept for an operator.
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

	exp, batchID, company, err := x.expand(ctx, msg)
	log := x.log.With(zap.String("batch_id", batchID), zap.Int64("company_id", company))
	var rej *RejectError
	switch {
	case errors.As(err, &rej):
		x.reject(ctx, msg, rej.Reason, log)
		return
	case err != nil:
		n := uint64(1)
		if md, mdErr := msg.Metadata(); mdErr == nil {
			n = md.NumDelivered
		}
		delay := min(time.Second<<min(n-1, 5), 30*time.Second)
		log.Warn("expand batch; will retry", zap.Uint64("delivery", n), zap.Duration("delay", delay), zap.Error(err))
		x.m.batches.WithLabelValues(lane, "retried").Inc()
		_ = msg.NakWithDelay(delay)
		return
	}
	x.m.batches.WithLabelValues(lane, exp.Result).Inc()
	if exp.Result == ResultFailed {
		log.Warn("batch could not be expanded; its messages are failed", zap.Int("messages", exp.Messages))
	}
	if err := msg.DoubleAck(ctx); err != nil {
		// The batch is committed; a redelivery finds its messages and acks.
		log.Warn("ack batch", zap.Error(err))
	}
	if exp.Due {
		x.eng.wake(exp.AccountID)
		for _, id := range exp.MoreAccounts {
			x.eng.wake(id)
		}
	}
}

// batchMessage is what every batch message of the SENDS stream says.
type batchMessage interface {
	proto.Message
	GetBatchId() string
	GetCompanyId() int64
}

// expand decodes one bus message as the batch its lane and subject say
// (a message batch on the campaign lane's batch subjects, else the lane's
// own) and expands it. company is the subject's.
func (x *Dispatcher) expand(ctx context.Context, msg jetstream.Msg) (exp Expansion, batchID string, company int64, err error) {
	subj, subjErr := bus.ParseSubject(msg.Subject())
	company = subj.CompanyID
	var b batchMessage
	var what string
	var run func() (Expansion, error)
	switch {
	case x.lane == LaneCampaign && subj.Kind == "batch":
		m := &sendsv1.MessageBatch{}
		b, what, run = m, "message batch", func() (Expansion, error) { return x.exp.Messages(ctx, m) }
	case x.lane == LaneCampaign:
		m := &sendsv1.CampaignBatch{}
		b, what, run = m, "campaign batch", func() (Expansion, error) { return x.exp.Campaign(ctx, m) }
	default:
		m := &sendsv1.AutomationBatch{}
		b, what, run = m, "automation batch", func() (Expansion, error) { return x.exp.Automation(ctx, m) }
	}
	if uerr := proto.Unmarshal(msg.Data(), b); uerr != nil {
		return Expansion{}, "", company, reject("undecodable %s: %v", what, uerr)
	}
	batchID = b.GetBatchId()
	if subjErr == nil && !publishedOnItsSubject(subj, b.GetCompanyId(), batchID) {
		return Expansion{}, batchID, company, reject("batch %s of company %d published on %s", batchID, b.GetCompanyId(), msg.Subject())
	}
	exp, err = run()
	return exp, batchID, company, err
}

// publishedOnItsSubject reports whether a batch came on its company's subject
// and, when the subject names a batch, on its own.
func publishedOnItsSubject(s bus.Subject, companyID int64, batchID string) bool {
	return s.CompanyID == companyID && (s.BatchID == "" || s.BatchID == batchID)
}

// reject terminates a batch that can never be expanded, after keeping it
// in rejected_bus_messages; if even that fails it is retried later.
func (x *Dispatcher) reject(ctx context.Context, msg jetstream.Msg, reason string, log *zap.Logger) {
	if err := store.KeepRejected(ctx, x.d.Pool, store.RejectedMessage{
		Subject: msg.Subject(), MsgID: msg.Headers().Get("Nats-Msg-Id"), Reason: reason,
		Payload: msg.Data(), RejectedAt: x.d.Clock(),
	}); err != nil {
		log.Warn("keep rejected batch; will retry", zap.Error(err))
		x.m.batches.WithLabelValues(string(x.lane), "retried").Inc()
		_ = msg.NakWithDelay(5 * time.Second)
		return
	}
	log.Error("batch rejected", zap.String("reason", reason))
	x.m.batches.WithLabelValues(string(x.lane), "rejected").Inc()
	_ = msg.Term()
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
