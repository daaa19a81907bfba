package ops_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/parleyhq/parley/pkg/ops"
)

type svcConfig struct{ Log ops.LogConfig }

func logOf(c svcConfig) ops.LogConfig { return c.Log }

// TestRunService: the app is built from the loaded configuration, runs
// until ctx ends and is cleaned up after; a configuration, logger or app
// that cannot be had is the error, and nothing after it runs.
func TestRunService(t *testing.T) {
	good := svcConfig{Log: ops.LogConfig{Level: "info", Format: "json"}}
	var steps []string
	newApp := func(_ context.Context, c svcConfig, log *zap.Logger) (string, func(), error) {
		if log == nil || c != good {
			t.Fatalf("newApp(%+v, %v)", c, log)
		}
		steps = append(steps, "new")
		return "app", func() { steps = append(steps, "cleanup") }, nil
	}
	run := func(a string, ctx context.Context) error {
		steps = append(steps, "run "+a)
		<-ctx.Done()
		return errors.New("stopped")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := ops.RunService(ctx, "svc", func() (svcConfig, error) { return good, nil }, logOf, newApp, run)
	if err == nil || err.Error() != "stopped" {
		t.Fatalf("err %v", err)
	}
	if want := []string{"new", "run app", "cleanup"}; !reflect.DeepEqual(steps, want) {
		t.Fatalf("steps %v, want %v", steps, want)
	}

	steps = nil
	bad := errors.New("PARLEY_X is required")
	if err := ops.RunService(ctx, "svc", func() (svcConfig, error) { return good, bad }, logOf, newApp, run); !errors.Is(err, bad) {
		t.Fatalf("load error: %v", err)
	}
	noLog := func() (svcConfig, error) { return svcConfig{Log: ops.LogConfig{Level: "loud", Format: "json"}}, nil }
	if err := ops.RunService(ctx, "svc", noLog, logOf, newApp, run); err == nil {
		t.Fatal("a bad log level was accepted")
	}
	failApp := func(context.Context, svcConfig, *zap.Logger) (string, func(), error) { return "", nil, bad }
	if err := ops.RunService(ctx, "svc", func() (svcConfig, error) { return good, nil }, logOf, failApp, run); !errors.Is(err, bad) {
		t.Fatalf("newApp error: %v", err)
	}
	if len(steps) != 0 {
		t.Fatalf("ran after an error: %v", steps)
	}
}

func TestClosersReverseOrder(t *testing.T) {
	var c ops.Closers
	var got []int
	closeAll := c.Close
	for i := range 3 {
		c.Add(func() { got = append(got, i) })
	}
	closeAll()
	if !reflect.DeepEqual(got, []int{2, 1, 0}) {
		t.Fatalf("closed %v", got)
	}
}

// TestRunWorker: on shutdown readiness is already 503 when the work's
// context ends; work that fails first stops the server and is the error.
func TestRunWorker(t *testing.T) {
	probe := ops.NewProbe()
	srv := ops.NewServer("127.0.0.1:0", http.NewServeMux())
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	readyAtStop := make(chan int, 1)
	done := make(chan error, 1)
	go func() {
		done <- srv.RunWorker(ctx, probe, zap.NewNop(), func(wctx context.Context) error {
			close(started)
			<-wctx.Done()
			rec := httptest.NewRecorder()
			probe.Readyz(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			readyAtStop <- rec.Code
			return nil
		})
	}()
	<-started
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if code := <-readyAtStop; code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz was %d when the work stopped, want 503", code)
	}

	broken := errors.New("consumer: stream not found")
	srv = ops.NewServer("127.0.0.1:0", http.NewServeMux())
	err := srv.RunWorker(context.Background(), ops.NewProbe(), zap.NewNop(), func(context.Context) error { return broken })
	if !errors.Is(err, broken) {
		t.Fatalf("work failing first: %v", err)
	}
}

// TestWarnerOncePerInterval: a repeated message is logged once within the
// interval; another message is not held back by it.
func TestWarnerOncePerInterval(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	w := ops.NewWarner(zap.New(core), time.Hour)
	for range 3 {
		w.Warn("poll failed")
	}
	w.Warn("flush failed")
	var got []string
	for _, e := range logs.All() {
		got = append(got, e.Message)
	}
	if want := []string{"poll failed", "flush failed"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("logged %v, want %v", got, want)
	}
}
