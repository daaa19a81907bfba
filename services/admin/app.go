package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/apikey"
	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/contacts"
	"github.com/parleyhq/parley/pkg/ops"
	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/pkg/store"
	"github.com/parleyhq/parley/pkg/waba"
	"github.com/parleyhq/parley/pkg/webhooks"
	"github.com/parleyhq/parley/services/admin/internal/accounts"
	"github.com/parleyhq/parley/services/admin/internal/adminapi"
	"github.com/parleyhq/parley/services/admin/internal/batches"
	"github.com/parleyhq/parley/services/admin/internal/config"
	"github.com/parleyhq/parley/services/admin/internal/console"
	"github.com/parleyhq/parley/services/admin/internal/conversations"
	"github.com/parleyhq/parley/services/admin/internal/credentials"
	"github.com/parleyhq/parley/services/admin/internal/loginthrottle"
	"github.com/parleyhq/parley/services/admin/internal/reports"
)

// sessionSweepInterval is how often expired console sessions are deleted.
const sessionSweepInterval = 10 * time.Minute

// app is the admin service's composition root.
type app struct {
	log     *zap.Logger
	probe   *ops.Probe
	server  *ops.Server
	handler http.Handler
	sweep   func(ctx context.Context)
}

// newApp connects the dependencies and builds the HTTP handler: the console
// at /, the admin JSON API at /admin/api/, and the probes. now is the clock
// of every key action, grace display and sign-in throttle (time.Now in
// production). cleanup releases what was opened, in reverse order.
func newApp(ctx context.Context, cfg config.Config, log *zap.Logger, now func() time.Time) (*app, func(), error) {
	var closers ops.Closers
	cleanup := closers.Close
	fail := func(err error) (*app, func(), error) {
		cleanup()
		return nil, func() {}, err
	}
	pool, err := store.Open(ctx, cfg.Postgres)
	if err != nil {
		return fail(err)
	}
	closers.Add(pool.Close)

	nc, err := bus.Connect(cfg.NATS, "parley-admin")
	if err != nil {
		return fail(err)
	}
	closers.Add(func() { _ = nc.Drain() })

	js, err := bus.JetStream(nc)
	if err != nil {
		return fail(err)
	}

	probe := ops.NewProbe(store.Check(pool), bus.Check(nc))
	publishFailures := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "parley_admin_invalidation_publish_failures_total",
		Help: "Key changes committed whose cache invalidation broadcast failed (gateways catch up when their cache entry expires).",
	})
	probe.Registry().MustRegister(publishFailures)

	creds := credentials.New(pool, apikey.NewStore(pool, now),
		func(ctx context.Context, inv bus.Invalidation) error {
			return bus.PublishInvalidation(ctx, nc, cfg.NATS, inv)
		},
		log, publishFailures)
	box, err := secretbox.New(cfg.Token.Key)
	if err != nil {
		return fail(err)
	}
	if cfg.Token.IsDevKey() {
		log.Warn("PARLEY_TOKEN_KEY is not set: webhook signing secrets are sealed with the development key")
	}
	if cfg.Webhooks.AllowPrivate {
		log.Warn("PARLEY_WEBHOOKS_ALLOW_PRIVATE is set: webhook endpoints may use http and private addresses")
	}
	hooks := webhooks.NewStore(pool, box, cfg.Webhooks).WithClock(now)
	client, err := cfg.Provider.NewClient()
	if err != nil {
		return fail(fmt.Errorf("provider client: %w", err))
	}
	closers.Add(client.Close)
	tpls := waba.Deps{Pool: pool, Catalog: catalog.NewStore(pool, box), Provider: client, Log: log.Named("waba")}
	submit := func(ctx context.Context, n waba.NewTemplate) (catalog.Template, error) {
		return waba.Submit(ctx, tpls, n)
	}
	sessions := console.NewSessions(pool, console.SessionOptions{
		Secure: cfg.Console.CookieSecure, Lifetime: cfg.Console.SessionLifetime, IdleTimeout: cfg.Console.SessionIdleTimeout,
	})
	ui, err := console.New(console.Deps{
		Users: accounts.NewStore(pool),
		Throttle: loginthrottle.New(pool, loginthrottle.Limits{
			PerEmail: cfg.Console.LoginMaxFailuresPerEmail, PerIP: cfg.Console.LoginMaxFailuresPerIP, Window: cfg.Console.LoginFailureWindow,
		}, now),
		Credentials:       creds,
		Sends:             batches.New(pool, now),
		Reports:           reports.New(pool),
		Webhooks:          hooks,
		Conversations:     conversations.New(pool, js, cfg.NATS, now),
		Templates:         console.TemplateDeps{Catalog: tpls.Catalog, Submit: submit},
		Sessions:          sessions,
		Log:               log.Named("console"),
		TrustedOrigins:    cfg.Console.TrustedOrigins,
		TrustForwardedFor: cfg.Console.TrustForwardedFor,
		Now:               now,
	})
	if err != nil {
		return fail(err)
	}
	if cfg.AdminToken == "" {
		log.Warn("PARLEY_ADMIN_TOKEN is not set: the admin API answers 503")
	}
	exists := func(ctx context.Context, id int64) (bool, error) {
		var found bool
		err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM companies WHERE id = $1)`, id).Scan(&found)
		return found, err
	}

	mux := http.NewServeMux()
	probe.Register(mux)
	mux.Handle(adminapi.Prefix, adminapi.New(cfg.AdminToken, creds, hooks, log.Named("adminapi")).
		WithAddressBook(contacts.NewStore(pool, now), exists).
		WithTemplates(adminapi.Templates{Catalog: tpls.Catalog, Submit: submit}, exists))
	mux.Handle("/", ui)
	handler := accessLog(log, mux)
	srv := ops.NewServer(cfg.Addr, handler)
	srv.DrainDelay = cfg.DrainDelay
	return &app{
		log: log, probe: probe, server: srv, handler: handler,
		// The webhook deliveries' retention is the webhook sender's
		// (webhooks.KeepDeliveries), beside the weeks it creates.
		sweep: func(ctx context.Context) { console.SweepSessions(ctx, pool, sessionSweepInterval, log) },
	}, cleanup, nil
}

func (a *app) run(ctx context.Context) error {
	sweepCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); a.sweep(sweepCtx) }()
	defer func() { stop(); <-done }()
	return a.server.Run(ctx, a.probe, a.log)
}

// accessLog logs every request but the probes' (method, path, status,
// duration); never a body, a header or a query string.
func accessLog(log *zap.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz", "/readyz", "/metrics":
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		log.Info("request", zap.String("method", r.Method), zap.String("path", r.URL.Path),
			zap.Int("status", sw.status), zap.Duration("duration", time.Since(start)))
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
