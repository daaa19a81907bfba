// Package ops is what every Parley process shares for running in production:
// the logger, the health, readiness and metrics endpoints, and the graceful
// shutdown of an HTTP server.
package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// NewLogger builds the one logger of a process. Level is debug, info, warn or
// error; format is json (production) or console (a developer's terminal).
func NewLogger(service, level, format string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	cfg := zap.NewProductionConfig()
	if format == "console" {
		cfg = zap.NewDevelopmentConfig()
		cfg.DisableStacktrace = true
	}
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.OutputPaths = []string{"stderr"}
	cfg.ErrorOutputPaths = []string{"stderr"}
	log, err := cfg.Build()
	if err != nil {
		return nil, fmt.Errorf("build logger: %w", err)
	}
	return log.With(zap.String("service", service)), nil
}

// Check is one dependency that must answer for the process to be ready,
// unless it is Optional: the process then works without it, degraded, and
// /readyz names it under "degraded" but stays 200 (taking every replica out
// of its load balancer for a dependency they can do without would turn a
// degraded service into an outage).
type Check struct {
	Name     string
	Ping     func(ctx context.Context) error
	Optional bool
}

// Probe answers /healthz (the process is alive), /readyz (it is ready for
// traffic: not shutting down and every dependency answers) and /metrics.
type Probe struct {
	shuttingDown atomic.Bool
	checks       []Check
	registry     *prometheus.Registry
	timeout      time.Duration
}

// NewProbe returns a probe with its own metrics registry (Go runtime and
// process collectors included).
func NewProbe(checks ...Check) *Probe {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &Probe{checks: checks, registry: reg, timeout: 2 * time.Second}
}

// Registry is where the process registers its own metrics.
func (p *Probe) Registry() *prometheus.Registry { return p.registry }

// AddCheck adds a readiness check; call it before serving.
func (p *Probe) AddCheck(c Check) { p.checks = append(p.checks, c) }

// ShuttingDown turns readiness to 503 so that load balancers stop sending
// traffic before the server drains.
func (p *Probe) ShuttingDown() { p.shuttingDown.Store(true) }

// Register mounts /healthz, /readyz and /metrics on mux.
func (p *Probe) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", p.Healthz)
	mux.HandleFunc("GET /readyz", p.Readyz)
	mux.Handle("GET /metrics", p.Metrics())
}

// Healthz answers 200 while the process runs.
func (p *Probe) Healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
}

// Readyz answers 200 when every required check passes and the process is
// not shutting down, else 503 with what failed. Optional checks that fail
// are listed under "degraded" either way.
func (p *Probe) Readyz(w http.ResponseWriter, r *http.Request) {
	if p.shuttingDown.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "shutting down"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), p.timeout)
	defer cancel()
	failed, degraded := p.runChecks(ctx)
	body := map[string]any{"status": "ready"}
	if len(degraded) > 0 {
		body["degraded"] = degraded
	}
	if len(failed) > 0 {
		body["status"], body["failed"] = "unavailable", failed
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

func (p *Probe) runChecks(ctx context.Context) (failed, degraded map[string]string) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	failed, degraded = map[string]string{}, map[string]string{}
	for _, c := range p.checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Ping(ctx); err != nil {
				mu.Lock()
				if c.Optional {
					degraded[c.Name] = err.Error()
				} else {
					failed[c.Name] = err.Error()
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return failed, degraded
}

// Metrics is the Prometheus handler for this probe's registry.
func (p *Probe) Metrics() http.Handler {
	return promhttp.HandlerFor(p.registry, promhttp.HandlerOpts{Registry: p.registry})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Server is an HTTP server that shuts down the way load balancers need.
type Server struct {
	HTTP *http.Server
	// DrainDelay is how long readiness reports 503 before the listener
	// closes, so that balancers notice. Zero in tests.
	DrainDelay time.Duration
	// ShutdownTimeout bounds how long in-flight requests may take to finish.
	ShutdownTimeout time.Duration
}

// NewServer returns a server with the timeouts every Parley listener uses.
func NewServer(addr string, h http.Handler) *Server {
	return &Server{
		HTTP: &http.Server{
			Addr:              addr,
			Handler:           h,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       30 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       120 * time.Second,
			MaxHeaderBytes:    64 << 10,
		},
		ShutdownTimeout: 20 * time.Second,
	}
}

// Run listens and serves until ctx is done, then turns readiness to 503,
// waits DrainDelay and shuts the server down gracefully.
func (s *Server) Run(ctx context.Context, probe *Probe, log *zap.Logger) error {
	ln, err := net.Listen("tcp", s.HTTP.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", s.HTTP.Addr, err)
	}
	return s.Serve(ctx, ln, probe, log)
}

// Serve is Run on a listener the caller opened (tests use port 0).
func (s *Server) Serve(ctx context.Context, ln net.Listener, probe *Probe, log *zap.Logger) error {
	errc := make(chan error, 1)
	go func() { errc <- s.HTTP.Serve(ln) }()
	log.Info("listening", zap.String("addr", ln.Addr().String()))
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	if probe != nil {
		probe.ShuttingDown()
	}
	log.Info("shutting down", zap.Duration("drain_delay", s.DrainDelay))
	if s.DrainDelay > 0 {
		time.Sleep(s.DrainDelay)
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.ShutdownTimeout)
	defer cancel()
	if err := s.HTTP.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// LogConfig is the logging part of every service's configuration.
type LogConfig struct {
	Level  string `env:"PARLEY_LOG_LEVEL" envDefault:"info"`
	Format string `env:"PARLEY_LOG_FORMAT" envDefault:"json"`
}

// Validate reports every problem with the configuration.
func (c LogConfig) Validate() error {
	var errs []error
	if _, err := zapcore.ParseLevel(c.Level); err != nil {
		errs = append(errs, fmt.Errorf("PARLEY_LOG_LEVEL %q: debug, info, warn or error", c.Level))
	}
	if c.Format != "json" && c.Format != "console" {
		errs = append(errs, fmt.Errorf("PARLEY_LOG_FORMAT %q: json or console", c.Format))
	}
	return errors.Join(errs...)
}
