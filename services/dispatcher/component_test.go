package dispatcher_test

// The component test of both commands: each boots as its main does (its
// environment from internal/config, validated, then New on its lane) against
// a fresh database, an embedded NATS, Redis under a key prefix of its own and
// the WhatsApp simulator, delivers one batch of its lane, serves its probes
// and metrics, and stops in order.

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/pkg/secretbox"
	"github.com/parleyhq/parley/services/dispatcher"
	"github.com/parleyhq/parley/services/dispatcher/internal/config"
	"github.com/parleyhq/parley/testkit/bustest"
	"github.com/parleyhq/parley/testkit/ratelimittest"
	"github.com/parleyhq/parley/testkit/serviceproc"
	"github.com/parleyhq/parley/testkit/storetest"
)

// command is a command's environment as its main reads it: the listen
// address addr and the shared part (the defaults, pointed at the test's
// servers).
type command func(addr string, shared dispatcher.Config) dispatcher.Command

func campaign(addr string, shared dispatcher.Config) dispatcher.Command {
	return config.Campaign{Addr: addr, Config: shared}
}

func automation(addr string, shared dispatcher.Config) dispatcher.Command {
	return config.Automation{Addr: addr, Config: shared}
}

// TestCommandsDeliverAndShutDownInOrder runs each command on its lane: it
// must make the stream, deliver a batch of its lane (two contacts), serve
// its probes and metrics, turn readiness 503 on shutdown, and stop cleanly.
func TestCommandsDeliverAndShutDownInOrder(t *testing.T) {
	t.Run("campaign-dispatcher", func(t *testing.T) { deliversAndShutsDown(t, record.LaneCampaign, nil, campaign) })
	t.Run("automation-dispatcher", func(t *testing.T) { deliversAndShutsDown(t, record.LaneAutomation, nil, automation) })
}

// TestCampaignOnRedisCluster is the campaign run with PARLEY_REDIS_MODE=cluster
// against a three-master Redis Cluster on loopback: the account's throughput
// is limited there, and every decision must be Redis's, none the
// per-process fallback's.
func TestCampaignOnRedisCluster(t *testing.T) {
	rc := ratelimittest.NewCluster(t).Config()
	deliversAndShutsDown(t, record.LaneCampaign, &rc, campaign)
}

func deliversAndShutsDown(t *testing.T, lane record.Lane, rc *ratelimit.RedisConfig, cmd command) {
	t.Helper()
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

	cfg, err := env.ParseAs[dispatcher.Config]()
	if err != nil {
		t.Fatal(err)
	}
	addr, err := serviceproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Postgres.URL = dbURL
	cfg.NATS = bustest.Config(ns.URL())
	if rc != nil {
		cfg.Redis = *rc
	} else {
		cfg.Redis = ratelimittest.Config(t)
	}
	cfg.Provider.BaseURL = simSrv.URL
	cfg.Provider.Timeout = 2 * time.Second
	cfg.Dispatch.PollInterval = 50 * time.Millisecond
	cfg.DrainDelay = 500 * time.Millisecond

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
	id := uuid.Must(uuid.NewV7()).String()
	phones := []string{"+393330000001", "+393330000002"}
	var subject string
	var batch proto.Message
	switch lane {
	case record.LaneCampaign:
		camp, err := cat.CreateCampaign(ctx, co.ID, "Hello", tpl.ID, acct.ID)
		if err != nil {
			t.Fatal(err)
		}
		subject = cfg.NATS.CampaignSubject(co.ID)
		batch = &sendsv1.CampaignBatch{BatchId: id, CompanyId: co.ID, CampaignId: camp.ID, Phones: phones, AcceptedAt: timestamppb.Now()}
	case record.LaneAutomation:
		auto, err := cat.CreateAutomation(ctx, catalog.NewAutomation{CompanyID: co.ID, Name: "Hello", Active: true,
			TemplateID: &tpl.ID, MessagingAccountID: &acct.ID})
		if err != nil {
			t.Fatal(err)
		}
		subject = cfg.NATS.AutomationSubject(co.ID)
		var contacts []*sendsv1.AutomationContact
		for _, p := range phones {
			contacts = append(contacts, &sendsv1.AutomationContact{Phone: p})
		}
		batch = &sendsv1.AutomationBatch{BatchId: id, CompanyId: co.ID, AutomationId: auto.ID, Contacts: contacts, AcceptedAt: timestamppb.Now()}
	default:
		t.Fatalf("lane %q", lane)
	}

	c := cmd(addr, cfg)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	a, cleanup, err := dispatcher.New(ctx, lane, c.Listen(), c.Shared(), zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	base := "http://" + addr
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
	data, err := proto.Marshal(batch)
	if err != nil {
		t.Fatal(err)
	}
	// The stream exists because the app made it at start.
	if _, err := js.Publish(ctx, subject, data, jetstream.WithMsgID(id)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := record.BatchStatus(ctx, pool, co.ID, id)
		if err == nil && b.Status == record.BatchCompleted {
			if b.Counts[record.StateSent] != 2 {
				t.Fatalf("batch = %+v", b)
			}
			break
		}
		if err != nil && !errors.Is(err, record.ErrNotFound) {
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
	for _, want := range []string{fmt.Sprintf(`parley_delivery_messages_total{lane="%s",outcome="sent"} 2`, lane),
		fmt.Sprintf(`parley_delivery_batches_total{lane="%s",result="expanded"} 1`, lane), "parley_delivery_send_seconds_bucket",
		"parley_ratelimit_"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	if rc != nil {
		for line := range strings.SplitSeq(metrics, "\n") {
			if strings.HasPrefix(line, "parley_ratelimit_fallback_total{") && !strings.HasSuffix(line, "} 0") {
				t.Errorf("a throughput decision fell back: %s", line)
			}
		}
		if !strings.Contains(metrics, "parley_ratelimit_fallback_total{") {
			t.Error("/metrics lacks parley_ratelimit_fallback_total")
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
