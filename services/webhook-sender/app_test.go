package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/parleyhq/parley/pkg/envconfig"
	"github.com/parleyhq/parley/pkg/events"
	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/pkg/webhooks"
	"github.com/parleyhq/parley/pkg/webhooks/webhooksim"
	"github.com/parleyhq/parley/services/webhook-sender/internal/config"
	"github.com/parleyhq/parley/testkit/bustest"
	"github.com/parleyhq/parley/testkit/serviceproc"
	"github.com/parleyhq/parley/testkit/storetest"
)

// TestAppSendsAndShutsDown boots this binary's newApp with its own
// configuration (read from an environment as main reads it) against a
// fresh database and an embedded NATS: an event appended to the outbox
// reaches the endpoint signed, the probes and metrics answer, and Run
// returns cleanly on shutdown.
func TestAppSendsAndShutsDown(t *testing.T) {
	ctx := context.Background()
	dbURL, pool := storetest.NewDatabase(t)
	ns := bustest.NewServer(t)
	bc := bustest.Config(ns.URL())
	addr, err := serviceproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := envconfig.LoadEnviron[config.Config]([]string{
		"PARLEY_WEBHOOK_SENDER_ADDR=" + addr, "PARLEY_POSTGRES_URL=" + dbURL,
		"PARLEY_NATS_URL=" + bc.URL, "PARLEY_NATS_STREAM=" + bc.Stream, "PARLEY_NATS_SUBJECT_PREFIX=" + bc.Prefix,
		"PARLEY_WEBHOOK_SENDER_STREAM=" + bc.Stream + "_EVENTS", "PARLEY_WEBHOOKS_ALLOW_PRIVATE=true",
	})
	if err != nil {
		t.Fatal(err)
	}
	recv := webhooksim.New()
	srv := httptest.NewServer(recv)
	defer srv.Close()
	defer recv.Close()
	box, err := secretbox.New(secretbox.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	var company int64
	if err := pool.QueryRow(ctx, `INSERT INTO companies (slug, name) VALUES ('acme', 'Acme') RETURNING id`).Scan(&company); err != nil {
		t.Fatal(err)
	}
	secret, _, err := webhooks.NewStore(pool, box, cfg.Webhooks).Create(ctx, company, webhooks.Input{URL: srv.URL + "/hooks/a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := recv.Set("a", webhooksim.Settings{Secrets: []string{secret}}); err != nil {
		t.Fatal(err)
	}

	a, cleanup, err := newApp(ctx, cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()

	id := "019ab7c2-0000-7000-8000-0000000000aa"
	if err := events.Append(ctx, pool, events.Event{ID: id, CompanyID: company, Type: events.MessageRead, At: time.Now(),
		Data: events.Message{BatchID: "019ab7c2-0000-7000-8000-000000000001", Phone: "+393331234567", State: "read", ChangedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for recv.Counts("a")[id] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("event not received: %+v", recv.Stats("a"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/readyz"); code != http.StatusOK {
		t.Fatalf("readyz = %d", code)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		_, body := get("/metrics")
		if strings.Contains(body, `parley_webhooks_deliveries_total{endpoint=`) && strings.Contains(body, `outcome="succeeded"} 1`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics lack the delivery:\n%s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after shutdown")
	}
	cleanup()
	if st := recv.Stats("a"); st.BadSignature != 0 || st.Accepted != 1 {
		t.Fatalf("receiver = %+v", st)
	}
}
