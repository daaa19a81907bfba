package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/ops"
	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/pkg/replies"
	"github.com/parleyhq/parley/pkg/segments"
	"github.com/parleyhq/parley/pkg/store"
	"github.com/parleyhq/parley/pkg/ttlcache"
	"github.com/parleyhq/parley/pkg/waba"
	"github.com/parleyhq/parley/services/gateway/internal/accept"
	"github.com/parleyhq/parley/services/gateway/internal/apidoc"
	"github.com/parleyhq/parley/services/gateway/internal/auth"
	"github.com/parleyhq/parley/services/gateway/internal/config"
	"github.com/parleyhq/parley/services/gateway/internal/httpapi"
	"github.com/parleyhq/parley/services/gateway/internal/idempotency"
	"github.com/parleyhq/parley/services/gateway/internal/sends"
	"github.com/parleyhq/parley/services/gateway/internal/statuses"
)

// app is the gateway's composition root.
type app struct {
	log    *zap.Logger
	probe  *ops.Probe
	server *ops.Server
	// background work that must stop after the server has drained.
	background []func(ctx context.Context)
}

// newApp connects the dependencies and builds the HTTP handler. cleanup
// releases what was opened, in reverse order.
func newApp(ctx context.Context, cfg config.Config, log *zap.Logger) (*app, func(), error) {
	return buildApp(ctx, cfg, log, time.Now)
}

// buildApp is newApp with the clock injected (tests move it).
func buildApp(ctx context.Context, cfg config.Config, log *zap.Logger, now func() time.Time) (*app, func(), error) {
	var closers ops.Closers
	cleanup := closers.Close
	fail := func(err error) (*app, func(), error) {
		cleanup()
		return nil, func() {}, err
	}
	debug.SetGCPercent(cfg.GCPercent)
	pool, err := store.Open(ctx, cfg.Postgres)
	if err != nil {
		return fail(err)
	}
	closers.Add(pool.Close)

	rdb := ratelimit.NewRedisClient(cfg.Redis)
	closers.Add(func() { _ = rdb.Close() })

	// No reconnect buffer: while NATS is away a publish fails at once (503)
	// instead of waiting in memory and landing after the client gave up.
	nc, err := bus.Connect(cfg.NATS, "parley-gateway", nats.ReconnectBufSize(-1))
	if err != nil {
		return fail(err)
	}
	closers.Add(func() { _ = nc.Drain() })

	pub, err := accept.New(nc, cfg.NATS, accept.Options{MaxPending: cfg.PublishMaxPending, Timeout: cfg.PublishTimeout,
		GroupsInFlight: cfg.GroupsInFlight, GroupMaxBatches: cfg.GroupMaxBatches})
	if err != nil {
		return fail(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = bus.EnsureStream(sctx, pub.JetStream(), cfg.NATS)
	cancel()
	if err != nil {
		return fail(err)
	}

	probe := ops.NewProbe(store.Check(pool), ratelimit.Check(rdb), bus.Check(nc))
	if err := probe.Registry().Register(pub.Collector()); err != nil {
		return fail(err)
	}
	limiter, err := ratelimit.New(rdb, cfg.Redis, log, probe.Registry())
	if err != nil {
		return fail(err)
	}
	closers.Add(limiter.Close)

	cacheCfg := ttlcache.Config{TTL: cfg.CacheTTL, StaleIfError: cfg.CacheStaleIfError}
	authn := auth.New(pool, auth.Config{Cache: cacheCfg, TouchEvery: time.Minute, FlushEvery: 10 * time.Second}, now, log)
	cat := catalog.NewCache(catalog.NewStore(pool, nil), cacheCfg, now)
	if _, err := bus.SubscribeInvalidations(nc, cfg.NATS, func(inv bus.Invalidation) {
		authn.Invalidate(inv)
		cat.Invalidate(inv)
	}); err != nil {
		return fail(err)
	}
	idem := idempotency.New(rdb, cfg.Redis.KeyPrefix, cfg.IdempotencyRetention, time.Minute)

	records := sendRecords{pool: pool, pending: accept.NewPending(pub.JetStream(), cfg.NATS), now: now,
		catalog: catalog.NewStore(pool, nil), log: log}
	applier := statuses.New(records, statuses.Options{MaxStatuses: cfg.StatusGroupMax, Wait: cfg.StatusGroupWait,
		Appliers: cfg.EffectiveStatusAppliers()})
	for _, c := range applier.Collectors() {
		if err := probe.Registry().Register(c); err != nil {
			return fail(err)
		}
	}
	segs := segments.NewStore(pool, now)
	if whatsapp.IsDevAppSecret(cfg.WebhookAppSecret) {
		log.Warn("PARLEY_WEBHOOK_APP_SECRET is the local development secret: set the Meta app secret in production")
	}

	docs, err := apidoc.Build(httpapi.DocLimits())
	if err != nil {
		return fail(fmt.Errorf("build the OpenAPI document: %w", err))
	}

	sender := sends.New(cat, segs, pub, now)
	gin.SetMode(gin.ReleaseMode)
	api := httpapi.New(httpapi.Config{
		MaxBodyBytes:       cfg.MaxBodyBytes,
		IdempotencyTimeout: 1500 * time.Millisecond, // three attempts of about 500 ms
		AccessLog:          cfg.AccessLog,
		Webhook:            httpapi.WebhookConfig{AppSecret: cfg.WebhookAppSecret, VerifyToken: cfg.WebhookVerifyToken},
		// A CSV download holds a database connection until it ends: half
		// the pool at most, so that the API's requests always have the rest.
		MaxExports: max(int(cfg.Postgres.MaxConns)/2, 1),
	}, httpapi.Deps{
		Auth:          authn,
		Limiter:       limiter,
		Sends:         sender,
		Idempotency:   idem,
		Batches:       records,
		Control:       records,
		Statuses:      webhookRecords{sendRecords: records, statuses: applier},
		Segments:      segs,
		Conversations: records,
		Replies:       replies.New(replies.NewStore(pool, now).WithStream(pub.JetStream(), cfg.NATS), pub, now),
		Reports:       records,
		Exports:       records,
		Docs:          docs,
		Metrics:       probe.Registry(),
		Log:           log,
	})
	mux := http.NewServeMux()
	probe.Register(mux)
	mux.Handle("/", api)
	srv := ops.NewServer(cfg.Addr, mux)
	srv.DrainDelay = cfg.DrainDelay
	return &app{
		log: log, probe: probe, server: srv,
		// The applier stops after the server has drained: the last
		// webhooks' groups are committed before they are answered.
		background: []func(context.Context){authn.RunTouches, applier.Run},
	}, cleanup, nil
}

// sendRecords is the record of batches and messages as the HTTP edge
// reads and updates it.
type sendRecords struct {
	pool    *pgxpool.Pool
	pending *accept.Pending
	now     func() time.Time
	catalog *catalog.Store
	log     *zap.Logger
}

// Batch finds a batch in the record or, not recorded yet, in the stream.
func (d sendRecords) Batch(ctx context.Context, companyID int64, batchID string) (record.Batch, error) {
	b, _, err := record.FindBatch(ctx, d.pool, d.pending, companyID, batchID)
	return b, err
}

func (d sendRecords) ListBatches(ctx context.Context, companyID int64, f record.BatchFilter) (record.BatchPage, error) {
	return record.ListBatches(ctx, d.pool, companyID, f)
}

// FindMessage finds a message either way by its message_id (digits) or its
// wamid.
func (d sendRecords) FindMessage(ctx context.Context, companyID int64, key string) (record.Entry, error) {
	return record.FindMessage(ctx, d.pool, companyID, key)
}

func (d sendRecords) PhoneMessages(ctx context.Context, companyID int64, phone string, f record.PhoneFilter) (record.PhonePage, error) {
	return record.PhoneMessages(ctx, d.pool, companyID, phone, f)
}

func (d sendRecords) Report(ctx context.Context, q record.ReportQuery) (record.SubjectReport, error) {
	return record.ReadSubjectReport(ctx, d.pool, q)
}

// OpenExport checks an export against the record and, for a batch, the
// stream.
func (d sendRecords) OpenExport(ctx context.Context, q record.ExportQuery) (httpapi.MessageExport, error) {
	e, err := record.OpenExport(ctx, d.pool, d.pending, q)
	if err != nil {
		return nil, err
	}
	return e, nil
}

func (d sendRecords) CancelBatch(ctx context.Context, companyID int64, batchID string) (record.CancelResult, error) {
	return record.CancelBatch(ctx, d.pool, d.pending, companyID, batchID, d.now())
}

func (d sendRecords) BatchMessages(ctx context.Context, companyID int64, batchID string, f record.Filter) (record.Page, error) {
	return record.BatchMessages(ctx, d.pool, d.pending, companyID, batchID, f)
}

// ApplyStatuses applies a group of status callbacks in one transaction
// (the Applier's store).
func (d sendRecords) ApplyStatuses(ctx context.Context, updates []whatsapp.StatusUpdate) error {
	_, err := record.ApplyStatuses(ctx, d.pool, updates, d.now())
	return err
}

// webhookRecords is the record as the provider's webhook updates it: the
// status callbacks of concurrent webhooks go through the group commit.
type webhookRecords struct {
	sendRecords
	statuses *statuses.Applier
}

// ApplyStatuses returns once the webhook's statuses are committed with
// their group.
func (d webhookRecords) ApplyStatuses(ctx context.Context, updates []whatsapp.StatusUpdate) error {
	return d.statuses.Apply(ctx, updates)
}

func (d sendRecords) ReceiveMessages(ctx context.Context, msgs []whatsapp.InboundMessage) (int, error) {
	res, err := record.Receive(ctx, d.pool, msgs, d.now())
	return res.Ignored, err
}

// ApplyAccountChanges applies the WABA webhooks' changes about templates
// and numbers (waba.ApplyChanges: no provider call, no token).
func (d sendRecords) ApplyAccountChanges(ctx context.Context, changes []whatsapp.AccountChange) (int, error) {
	out, err := waba.ApplyChanges(ctx, waba.Deps{Pool: d.pool, Catalog: d.catalog, Log: d.log}, changes)
	return out.Ignored, err
}

func (d sendRecords) Contact(ctx context.Context, companyID int64, phone string) (record.ContactView, error) {
	return record.Contact(ctx, d.pool, companyID, phone, d.now())
}

func (d sendRecords) EraseContact(ctx context.Context, companyID int64, phone string) (record.Erasure, error) {
	return record.EraseContact(ctx, d.pool, companyID, phone, d.now())
}

func (d sendRecords) Conversations(ctx context.Context, companyID int64, f record.ConversationFilter) (record.ConversationPage, error) {
	return record.Conversations(ctx, d.pool, companyID, f, d.now())
}

func (a *app) run(ctx context.Context) error {
	ln, err := net.Listen("tcp", a.server.HTTP.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", a.server.HTTP.Addr, err)
	}
	return a.serve(ctx, ln)
}

// serve runs the background work and the server until ctx ends; the
// background work stops only after the server drained, so that what the last
// requests queued is written.
func (a *app) serve(ctx context.Context, ln net.Listener) error {
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	for _, f := range a.background {
		wg.Add(1)
		go func() { defer wg.Done(); f(bg) }()
	}
	err := a.server.Serve(ctx, ln, a.probe, a.log)
	stop()
	wg.Wait()
	return err
}
