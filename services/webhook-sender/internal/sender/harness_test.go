package sender

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/events"
	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/pkg/webhooks"
	"github.com/parleyhq/parley/pkg/webhooks/webhooksim"
	"github.com/parleyhq/parley/testkit/bustest"
	"github.com/parleyhq/parley/testkit/storetest"
)

// harness is a database, an embedded NATS, the webhooks store and the test
// receiver on loopback.
type harness struct {
	t     *testing.T
	ctx   context.Context
	pool  *pgxpool.Pool
	js    jetstream.JetStream
	bus   bus.Config
	store *webhooks.Store
	recv  *webhooksim.Receiver
	url   string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, ctx: context.Background()}
	_, h.pool = storetest.NewDatabase(t)
	ns := bustest.NewServer(t)
	h.bus = bustest.Config(ns.URL())
	nc, err := bus.Connect(h.bus, t.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if h.js, err = bus.JetStream(nc); err != nil {
		t.Fatal(err)
	}
	box, err := secretbox.New(secretbox.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	cfg := webhooks.DefaultConfig()
	cfg.AllowPrivate = true
	h.store = webhooks.NewStore(h.pool, box, cfg)
	h.recv = webhooksim.New()
	srv := httptest.NewServer(h.recv)
	t.Cleanup(func() {
		h.recv.Close()
		srv.Close()
	})
	h.url = srv.URL
	return h
}

func (h *harness) company(slug string) int64 {
	h.t.Helper()
	var id int64
	if err := h.pool.QueryRow(h.ctx, `INSERT INTO companies (slug, name) VALUES ($1, $1) RETURNING id`, slug).Scan(&id); err != nil {
		h.t.Fatal(err)
	}
	return id
}

// endpoint creates an endpoint of company at the receiver's /hooks/name.
func (h *harness) endpoint(company int64, name string, types ...string) webhooks.Endpoint {
	h.t.Helper()
	secret, ep, err := h.store.Create(h.ctx, company, webhooks.Input{URL: h.url + "/hooks/" + name, EventTypes: types})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.recv.Set(name, webhooksim.Settings{Secrets: []string{secret}}); err != nil {
		h.t.Fatal(err)
	}
	return ep
}

func testConfig() Config {
	return Config{
		Stream: "EV", RelayBatch: 500, Relays: 2, Fanouts: 2, RelayInterval: 10 * time.Millisecond, FetchBatch: 500, AckWait: 5 * time.Second,
		Timeout: 2 * time.Second, Concurrency: 4, QueueSize: 100, Lease: 5 * time.Second, PollInterval: 50 * time.Millisecond,
		BackoffBase: 50 * time.Millisecond, BackoffCap: 200 * time.Millisecond, RetryPeriod: time.Hour, DisableAfter: time.Hour,
		FlushInterval: 5 * time.Millisecond, FlushSize: 200, Recorders: 2, CacheTTL: 100 * time.Millisecond,
		ShutdownTimeout: 5 * time.Second,
	}
}

// start runs a sender until the test ends (or stop is called).
func (h *harness) start(cfg Config, allowPrivate bool) (s *Sender, stop func()) {
	h.t.Helper()
	cfg.Stream = h.bus.Stream + "_EV"
	s, err := New(cfg, Deps{Pool: h.pool, JS: h.js, Store: h.store, Client: NewClient(cfg.Timeout, cfg.Concurrency, allowPrivate, nil),
		Prefix: h.bus.Prefix, AllowPrivate: allowPrivate, Log: zaptest.NewLogger(h.t, zaptest.Level(zap.WarnLevel)),
		Registry: prometheus.NewRegistry()})
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				h.t.Errorf("sender: %v", err)
			}
		})
	}
	h.t.Cleanup(stop)
	return s, stop
}

// emit appends n events of type t for company, as a dispatcher would.
func (h *harness) emit(company int64, t events.Type, n int) []string {
	h.t.Helper()
	return h.emitAt(company, t, n, time.Now())
}

// emitAt appends n events of type t for company as if recorded at at: their
// ids are UUIDv7 of that time, as events.Append mints them.
func (h *harness) emitAt(company int64, t events.Type, n int, at time.Time) []string {
	h.t.Helper()
	evs := make([]events.Event, n)
	ids := make([]string, n)
	for i := range evs {
		id := idAt(at)
		ids[i] = id
		evs[i] = events.Event{ID: id, CompanyID: company, Type: t, At: at, Data: events.Message{
			BatchID: "019ab7c2-0000-7000-8000-000000000001", MessageID: int64(i), Phone: "+393331234567", State: "sent", ChangedAt: at}}
	}
	if err := events.Append(h.ctx, h.pool, evs...); err != nil {
		h.t.Fatal(err)
	}
	return ids
}

func (h *harness) count(sql string, args ...any) int {
	h.t.Helper()
	var n int
	if err := h.pool.QueryRow(h.ctx, sql, args...).Scan(&n); err != nil {
		h.t.Fatal(err)
	}
	return n
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// idAt is a UUIDv7 of the time at: the id events.Append would have minted
// for an event recorded then.
func idAt(at time.Time) string {
	u := uuid.Must(uuid.NewV7())
	ms := uint64(at.UnixMilli())
	for i := range 6 {
		u[i] = byte(ms >> (40 - 8*i))
	}
	return u.String()
}
