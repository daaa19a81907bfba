package ops

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"
)

// Main is a service's main: it loads the configuration, builds the logger
// and the app, and runs the app until SIGINT or SIGTERM. On an error it
// prints "name: error" to stderr and exits 1; otherwise it returns (exit 0).
func Main[C, A any](name string, load func() (C, error), logOf func(C) LogConfig,
	newApp func(context.Context, C, *zap.Logger) (A, func(), error), run func(A, context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := RunService(ctx, name, load, logOf, newApp, run)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// RunService is Main without the signals and the exit: the app runs until
// ctx ends, then its cleanup runs and the logger is synced.
func RunService[C, A any](ctx context.Context, name string, load func() (C, error), logOf func(C) LogConfig,
	newApp func(context.Context, C, *zap.Logger) (A, func(), error), run func(A, context.Context) error) error {
	cfg, err := load()
	if err != nil {
		return err
	}
	lc := logOf(cfg)
	log, err := NewLogger(name, lc.Level, lc.Format)
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck
	a, cleanup, err := newApp(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer cleanup()
	return run(a, ctx)
}

// Closers releases what a composition root opened, the last opened first.
type Closers []func()

// Add registers f to run at Close.
func (c *Closers) Add(f func()) { *c = append(*c, f) }

// Close runs the registered functions in reverse order.
func (c *Closers) Close() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
}

// RunWorker serves the probe on s and runs work until ctx ends. work gets a
// context of its own that outlives ctx: on shutdown readiness turns 503
// first, then work's context ends and RunWorker waits for work to finish what
// it has in flight and for the server to shut down. If the server or work
// fails first, RunWorker stops the other and returns the error.
func (s *Server) RunWorker(ctx context.Context, probe *Probe, log *zap.Logger, work func(context.Context) error) error {
	sctx, stopServer := context.WithCancel(ctx)
	defer stopServer()
	wctx, stopWork := context.WithCancel(context.Background())
	defer stopWork()
	srvErr := make(chan error, 1)
	go func() { srvErr <- s.Run(sctx, probe, log) }()
	workErr := make(chan error, 1)
	go func() { workErr <- work(wctx) }()
	select {
	case <-ctx.Done():
		probe.ShuttingDown()
		stopWork()
		err := <-workErr
		return errors.Join(err, <-srvErr)
	case err := <-workErr:
		// work could not start (its consumer, say).
		stopServer()
		return errors.Join(err, <-srvErr)
	case err := <-srvErr:
		stopWork()
		return errors.Join(err, <-workErr)
	}
}
