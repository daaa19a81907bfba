package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/bustest"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
	"github.com/parleyhq/parley/pkg/delivery"
	"github.com/parleyhq/parley/pkg/ratelimit/ratelimittest"
	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/pkg/store/storetest"
	"github.com/parleyhq/parley/services/automation-dispatcher/internal/config"
)

// TestAppDeliversAndShutsDownInOrder boots the dispatcher's composition
// root against a fresh database, an embedded NATS, Redis under a key prefix
// of its own and the WhatsApp simulator: it must make the stream, deliver an
// automation trigger, serve its probes and metrics, and stop cleanly.
func TestAppDeliversAndShutsDownInOrder(t *testing.T) {
	ctx := context.Background()
	dbURL, pool := storetest.NewDatabase(t)
	ns := bustest.NewServer(t)
	sim, err := whatsappsim.New(whatsappsim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	simSrv := httptest.NewServer(sim)
	t.Cleanup(func() {
		simSrv.Close()
		_ = sim.Close()
	})

	cfg, err := env.ParseAs[config.Config]()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = ln.Addr().String()
	ln.Close()
	cfg.Postgres.URL = dbURL
	cfg.NATS = bustest.Config(ns.URL())
	cfg.Redis = ratelimittest.Config(t)
	cfg.Provider.BaseURL = simSrv.URL
	cfg.Provider.Timeout = 2 * time.Second
	cfg.Dispatch.PollInterval = 50 * time.Millisecond
	cfg.DrainDelay = 500 * time.Millisecond
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}

	box, err := secretbox.New(cfg.Token.Key)
	if err != nil {
		t.Fatal(err)
	}
	cat := catalog.NewStore(pool, box)
	co, err := cat.CreateCompany(ctx, catalog.NewCompany{Slug: "acme", Name: "Acme", SubscriptionActive: true, Provisioned: true})
	if err != nil {
		t.Fatal(err)
	}
	acct, err := cat.CreateMessagingAccount(ctx, catalog.NewMessagingAccount{CompanyID: co.ID, Name: "main",
		PhoneNumberID: "5550001", AccessToken: "app-test-token", Connected: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.SetAccount(whatsappsim.Account{PhoneNumberID: acct.PhoneNumberID, Token: "app-test-token"}); err != nil {
		t.Fatal(err)
	}
	tpl, err := cat.CreateTemplate(ctx, catalog.NewTemplate{CompanyID: co.ID, Template: whatsapp.Template{Name: "hello"}})
	if err != nil {
		t.Fatal(err)
	}
	auto, err := cat.CreateAutomation(ctx, catalog.NewAutomation{CompanyID: co.ID, Name: "Hello", Active: true,
		TemplateID: &tpl.ID, MessagingAccountID: &acct.ID})
	if err != nil {
		t.Fatal(err)
	}

	a, cleanup, err := newApp(ctx, cfg, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.run(runCtx) }()
	base := "http://" + cfg.Addr
	waitStatus(t, base+"/readyz", http.StatusOK)

	nc, err := bus.Connect(cfg.NATS, "app-test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := bus.JetStream(nc)
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.Must(uuid.NewV7()).String()
	data, err := proto.Marshal(&sendsv1.AutomationBatch{BatchId: id, CompanyId: co.ID, AutomationId: auto.ID,
		Contacts:   []*sendsv1.AutomationContact{{Phone: "+393330000001"}, {Phone: "+393330000002"}},
		AcceptedAt: timestamppb.Now()})
	if err != nil {
		t.Fatal(err)
	}
	// The stream exists because the app made it at start.
	if _, err := js.Publish(ctx, cfg.NATS.AutomationSubject(co.ID), data, jetstream.WithMsgID(id)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := delivery.BatchStatus(ctx, pool, co.ID, id)
		if err == nil && b.Status == delivery.BatchCompleted {
			if b.Counts[delivery.StateSent] != 2 {
				t.Fatalf("batch = %+v", b)
			}
			break
		}
		if err != nil && !errors.Is(err, delivery.ErrNotFound) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch not completed: %+v, %v", b, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := sim.Stats().Accepted; n != 2 {
		t.Fatalf("provider accepted %d", n)
	}
	metrics := get(t, base+"/metrics")
	for _, want := range []string{`parley_delivery_messages_total{lane="automation",outcome="sent"} 2`,
		`parley_delivery_batches_total{lane="automation",result="expanded"} 1`, "parley_delivery_send_seconds_bucket",
		"parley_ratelimit_"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	stop()
	// Readiness turns 503 first (for the drain delay), then everything stops.
	waitStatus(t, base+"/readyz", http.StatusServiceUnavailable)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after the context ended")
	}
	cleanup()
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("probe still served after shutdown")
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func waitStatus(t *testing.T, url string, status int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == status {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer %d: %v", url, status, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
