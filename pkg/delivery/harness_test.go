package delivery

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/testkit/bustest"
	"github.com/parleyhq/parley/testkit/ratelimittest"
)

// harness is a fixture with everything a dispatcher runs on: an embedded
// NATS with its own stream, Redis under a key prefix of its own, and the
// WhatsApp simulator (in process, over loopback HTTP) serving the
// fixture's account.
type harness struct {
	*fixture
	nats    *bustest.Server
	nc      *nats.Conn
	js      jetstream.JetStream
	busCfg  bus.Config
	sim     *whatsappsim.Sim
	client  *whatsapp.Client
	limiter *ratelimit.Limiter
	// throttleKeys records the keys the dispatchers asked the limiter for.
	throttleKeys sync.Map
	// pacer is the Redis pacer of WhatsApp's rules (rules.go), on the
	// harness's key prefix; dispatchers get it when paced is set.
	pacer *ratelimit.Pacer
	paced bool
	// sync is the dispatchers' Deps.SyncTemplates.
	sync func(context.Context) (int, error)
}

// recordingThrottle is the harness's limiter, noting each key it is asked
// for.
type recordingThrottle struct {
	*ratelimit.Limiter
	keys *sync.Map
}

func (r recordingThrottle) WaitEach(ctx context.Context, key string, perSecond, n int, use func(granted int)) (int, error) {
	r.keys.Store(key, true)
	return r.Limiter.WaitEach(ctx, key, perSecond, n, use)
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	ns := bustest.NewServer(t)
	h := newHarnessOn(t, ns.URL())
	h.nats = ns
	return h
}

// newHarnessOn is a harness on the NATS server at url, with a stream and
// subject prefix of its own that are deleted when the test ends.
func newHarnessOn(t *testing.T, url string) *harness {
	t.Helper()
	h := &harness{fixture: newFixture(t)}
	h.busCfg = bustest.Config(url)
	nc, err := bus.Connect(h.busCfg, t.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	h.nc = nc
	if h.js, err = bus.JetStream(nc); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.EnsureStream(h.ctx, h.js, h.busCfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.js.DeleteStream(context.Background(), h.busCfg.Stream) })

	h.sim, err = whatsappsim.New(whatsappsim.Config{Throughput: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h.sim)
	t.Cleanup(func() {
		srv.Close()
		_ = h.sim.Close()
	})
	h.serve(h.acct.PhoneNumberID)
	h.client, err = whatsapp.NewClient(whatsapp.Config{BaseURL: srv.URL, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.client.Close)

	rcfg := ratelimittest.Config(t)
	rdb := ratelimit.NewRedisClient(rcfg)
	t.Cleanup(func() { _ = rdb.Close() })
	h.pacer = ratelimit.NewPacer(rdb, rcfg)
	h.limiter, err = ratelimit.New(rdb, rcfg, zap.NewNop(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.limiter.Close)
	return h
}

// serve makes the simulator accept sends of an account.
func (h *harness) serve(phoneNumberID string) {
	h.t.Helper()
	if err := h.sim.SetAccount(whatsappsim.Account{PhoneNumberID: phoneNumberID, Token: testToken, ThroughputPerSecond: 100_000}); err != nil {
		h.t.Fatal(err)
	}
}

// dispatcher is a running Dispatcher; stop shuts it down gracefully.
type runningDispatcher struct {
	*Dispatcher
	stop func()
}

func (h *harness) start(lane record.Lane, cfg Config) *runningDispatcher {
	h.t.Helper()
	return h.startWith(lane, cfg, recordingThrottle{h.limiter, &h.throttleKeys})
}

// startWith starts a dispatcher whose sends are paced by throttle.
func (h *harness) startWith(lane record.Lane, cfg Config, throttle Throttle) *runningDispatcher {
	h.t.Helper()
	deps := Deps{
		Pool: h.pool, JS: h.js, Bus: h.busCfg, Catalog: h.cat, Sender: h.client, Throttle: throttle,
		Clock: h.clock.Now, Log: zaptest.NewLogger(h.t, zaptest.Level(zap.WarnLevel)), Registry: prometheus.NewRegistry(),
	}
	if h.paced {
		deps.Pacer = h.pacer
	}
	deps.SyncTemplates = h.sync
	d, err := New(lane, cfg, deps)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				h.t.Errorf("dispatcher: %v", err)
			}
		})
	}
	h.t.Cleanup(stop)
	return &runningDispatcher{Dispatcher: d, stop: stop}
}

// sentCount is how many sends this dispatcher recorded.
func (d *runningDispatcher) sentCount() float64 {
	return testutil.ToFloat64(d.m.messages.WithLabelValues(string(d.lane), string(record.OutcomeSent)))
}

// publish puts a batch on the stream as the gateway does, with the batch id
// as Nats-Msg-Id unless msgID says otherwise (a redelivery the stream's
// de-duplication would not catch).
func (h *harness) publish(b proto.Message, msgID string) {
	h.t.Helper()
	var subject, id string
	switch b := b.(type) {
	case *sendsv1.CampaignBatch:
		subject, id = h.busCfg.CampaignSubject(b.GetCompanyId()), b.GetBatchId()
	case *sendsv1.AutomationBatch:
		subject, id = h.busCfg.AutomationSubject(b.GetCompanyId()), b.GetBatchId()
	case *sendsv1.MessageBatch:
		subject, id = h.busCfg.BatchSubject(b.GetCompanyId()), b.GetBatchId()
	}
	if msgID != "" {
		id = msgID
	}
	data, err := proto.Marshal(b)
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.js.Publish(h.ctx, subject, data, jetstream.WithMsgID(id)); err != nil {
		h.t.Fatal(err)
	}
}

// waitStreamEmpty waits until the work queue holds nothing: every stream
// message acked or terminated.
func (h *harness) waitStreamEmpty(within time.Duration) {
	h.t.Helper()
	eventually(h.t, within, "stream empty", func() bool {
		s, err := h.js.Stream(context.Background(), h.busCfg.Stream)
		if err != nil {
			return false
		}
		info, err := s.Info(context.Background())
		return err == nil && info.State.Msgs == 0
	})
}

// sends is how many accepted sends the simulator received for a number.
func (h *harness) sends(phone string) int64 { return h.sim.SendCount(phone) }

// waitBatch waits until a batch reaches status.
func (h *harness) waitBatch(id string, status record.BatchState, within time.Duration) record.Batch {
	h.t.Helper()
	var b record.Batch
	eventually(h.t, within, "batch "+id+" "+string(status), func() bool {
		var err error
		b, err = record.BatchStatus(h.ctx, h.pool, h.company.ID, id)
		if errors.Is(err, record.ErrNotFound) {
			return false
		}
		if err != nil {
			h.t.Fatal(err)
		}
		return b.Status == status
	})
	return b
}

// received returns what the simulator received for a number, oldest first.
func (h *harness) received(phone string) []whatsappsim.Received {
	return h.sim.Messages(whatsappsim.Filter{To: strings.TrimPrefix(phone, "+"), Limit: 100})
}
