package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"

	"github.com/parleyhq/parley/pkg/apikey"
	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/ops"
	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/pkg/store"
	"github.com/parleyhq/parley/services/gateway/internal/config"
	"github.com/parleyhq/parley/testkit/bustest"
	"github.com/parleyhq/parley/testkit/ratelimittest"
	"github.com/parleyhq/parley/testkit/storetest"
)

const (
	testAppSecret   = "test-app-secret"
	testVerifyToken = "test-verify-token"
)

// testClock is the gateway's clock in tests.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// tenant is a provisioned company with what a send names.
type tenant struct {
	company    catalog.Company
	key        string
	campaign   catalog.Campaign
	automation catalog.Automation // active, api, template + connected account, variables ["order_id"]
	account    catalog.MessagingAccount
	template   catalog.Template
}

// gw is a real gateway (buildApp) on a loopback port, against a fresh
// database, an embedded NATS and Redis (shared, unique prefix, or private).
type gw struct {
	t       *testing.T
	url     string
	pool    *pgxpool.Pool
	cat     *catalog.Store
	keys    *apikey.Store
	clock   *testClock
	nats    *bustest.Server
	busCfg  bus.Config
	js      jetstream.JetStream
	nc      *nats.Conn
	redis   ratelimit.RedisConfig
	dbURL   string
	stopApp func()
	// configure changes the configuration before each start (gwOptions).
	configure func(*config.Config)
}

type gwOptions struct {
	redis *ratelimit.RedisConfig // nil: the shared server with a unique prefix
	// configure changes the configuration the gateway starts with.
	configure func(*config.Config)
}

func newGateway(t *testing.T, o gwOptions) *gw {
	t.Helper()
	dbURL, pool := storetest.NewDatabase(t)
	box, err := secretbox.New(secretbox.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	g := &gw{t: t, pool: pool, dbURL: dbURL, cat: catalog.NewStore(pool, box),
		clock: &testClock{t: time.Now().UTC()}, nats: bustest.NewServer(t), configure: o.configure}
	g.keys = apikey.NewStore(pool, g.clock.now)
	g.busCfg = bustest.Config(g.nats.URL())
	if o.redis != nil {
		g.redis = *o.redis
	} else {
		g.redis = ratelimittest.Config(t)
	}
	g.nc, err = bus.Connect(g.busCfg, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.nc.Close)
	if g.js, err = jetstream.New(g.nc); err != nil {
		t.Fatal(err)
	}
	g.start()
	return g
}

func (g *gw) config(addr string) config.Config {
	return config.Config{
		Addr: addr, MaxBodyBytes: 1 << 20, AccessLog: true,
		CacheTTL: time.Hour, CacheStaleIfError: time.Minute, // broadcasts, not the TTL, must do the work here
		PublishTimeout: 2 * time.Second, PublishMaxPending: 256, GroupsInFlight: 2, GroupMaxBatches: 512, IdempotencyRetention: 24 * time.Hour,
		StatusGroupMax: 1000, StatusGroupWait: 10 * time.Millisecond, StatusAppliers: 2,
		WebhookAppSecret: testAppSecret, WebhookVerifyToken: testVerifyToken, GCPercent: 100,
		Log:      ops.LogConfig{Level: "debug", Format: "console"},
		Postgres: store.Config{URL: g.dbURL, MaxConns: 5},
		Redis:    g.redis,
		NATS:     g.busCfg,
	}
}

func (g *gw) start() {
	t := g.t
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	cfg := g.config(ln.Addr().String())
	if g.configure != nil {
		g.configure(&cfg)
	}
	a, cleanup, err := buildApp(ctx, cfg, log, g.clock.now)
	if err != nil {
		cancel()
		t.Fatalf("build gateway: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- a.serve(ctx, ln) }()
	g.url = "http://" + ln.Addr().String()
	g.stopApp = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway stopped with %v", err)
		}
		cleanup()
	}
	t.Cleanup(func() {
		if g.stopApp != nil {
			g.stopApp()
			g.stopApp = nil
		}
	})
}

// provision creates a subscribed, provisioned company with a key, a
// campaign and a working automation.
func (g *gw) provision(slug string) tenant {
	t := g.t
	ctx := context.Background()
	var tn tenant
	var err error
	if tn.company, err = g.cat.CreateCompany(ctx, catalog.NewCompany{Slug: slug, Name: slug, SubscriptionActive: true, Provisioned: true}); err != nil {
		t.Fatal(err)
	}
	if tn.key, _, err = g.keys.Create(ctx, tn.company.ID, apikey.Actor{Label: "test"}); err != nil {
		t.Fatal(err)
	}
	if tn.account, err = g.cat.CreateMessagingAccount(ctx, catalog.NewMessagingAccount{CompanyID: tn.company.ID, Name: "main",
		PhoneNumberID: strconv.FormatInt(1_000_000+tn.company.ID, 10), AccessToken: "tok", Connected: true}); err != nil {
		t.Fatal(err)
	}
	if tn.template, err = g.cat.CreateTemplate(ctx, catalog.NewTemplate{CompanyID: tn.company.ID, Template: whatsapp.Template{
		Name: "hello", BodyParameters: []whatsapp.Binding{{Source: "first_name", Default: "there"}, {Source: "variable", Name: "order_id", Default: "-"}}}}); err != nil {
		t.Fatal(err)
	}
	if tn.campaign, err = g.cat.CreateCampaign(ctx, tn.company.ID, "camp", tn.template.ID, tn.account.ID); err != nil {
		t.Fatal(err)
	}
	if tn.automation, err = g.cat.CreateAutomation(ctx, catalog.NewAutomation{CompanyID: tn.company.ID, Name: "auto", Active: true,
		TemplateID: &tn.template.ID, MessagingAccountID: &tn.account.ID, TriggerVariables: []string{"order_id"}}); err != nil {
		t.Fatal(err)
	}
	return tn
}

// broadcast publishes an invalidation as the admin side does.
func (g *gw) broadcast(kind bus.Kind, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := bus.PublishInvalidation(ctx, g.nc, g.busCfg, bus.Invalidation{Kind: kind, ID: id}); err != nil {
		g.t.Fatal(err)
	}
	// The gateway's subscription is on another connection: a flush of ours
	// does not prove it got it. Give it a moment, as a real client would see.
	time.Sleep(50 * time.Millisecond)
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return m
}

func (g *gw) do(method, path, key string, body []byte, headers ...string) response {
	g.t.Helper()
	req, err := http.NewRequest(method, g.url+path, bytes.NewReader(body))
	if err != nil {
		g.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("service-api-key", key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		g.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func (g *gw) post(path, key string, body string, headers ...string) response {
	g.t.Helper()
	return g.do(http.MethodPost, path, key, []byte(body), headers...)
}

// streamCount is how many batches the stream holds.
func (g *gw) streamCount() uint64 {
	g.t.Helper()
	s, err := g.js.Stream(context.Background(), g.busCfg.Stream)
	if err != nil {
		g.t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		g.t.Fatal(err)
	}
	return info.State.Msgs
}

// sentBatch reads the batch a 202 answered from the stream, where its id
// says (its group, or its own subject: bus.Config.FindBatch), into m.
func (g *gw) sentBatch(companyID int64, r response, m proto.Message) {
	g.t.Helper()
	id, _ := r.json(g.t)["batch_id"].(string)
	s, err := g.js.Stream(context.Background(), g.busCfg.Stream)
	if err != nil {
		g.t.Fatal(err)
	}
	b, _, err := g.busCfg.FindBatch(context.Background(), s, companyID, id)
	if err != nil {
		g.t.Fatalf("batch %q of company %d not in the stream: %v", id, companyID, err)
	}
	if b.ProtoReflect().Descriptor() != m.ProtoReflect().Descriptor() {
		g.t.Fatalf("batch %s is a %s, not a %s", id, b.ProtoReflect().Descriptor().Name(), m.ProtoReflect().Descriptor().Name())
	}
	proto.Reset(m)
	proto.Merge(m, b)
}

func redisClient(t *testing.T, g *gw) redis.UniversalClient {
	t.Helper()
	rdb := ratelimit.NewRedisClient(g.redis)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func newPrivateRedis(t *testing.T) *ratelimittest.Server { return ratelimittest.NewServer(t) }
