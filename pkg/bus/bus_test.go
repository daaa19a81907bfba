package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/testkit/bustest"
)

func TestInvalidationReachesEverySubscriber(t *testing.T) {
	srv := bustest.NewServer(t)
	cfg := bustest.Config(srv.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	got := make(chan bus.Invalidation, 4)
	for range 2 {
		nc, err := bus.Connect(cfg, "sub")
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if _, err := bus.SubscribeInvalidations(nc, cfg, func(inv bus.Invalidation) { got <- inv }); err != nil {
			t.Fatal(err)
		}
		if err := nc.FlushWithContext(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pub, err := bus.Connect(cfg, "pub")
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	// A malformed note is ignored, not delivered as an empty invalidation.
	if err := pub.Publish(cfg.InvalidationSubject(), []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	want := bus.Invalidation{Kind: bus.KindAPIKey, ID: "abc123"}
	if err := bus.PublishInvalidation(ctx, pub, cfg, want); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case inv := <-got:
			if inv != want {
				t.Fatalf("got %+v, want %+v", inv, want)
			}
		case <-ctx.Done():
			t.Fatal("invalidation not delivered to both subscribers")
		}
	}
}

func TestEnsureStreamIsIdempotentAndSurvivesRestart(t *testing.T) {
	srv := bustest.NewServer(t)
	cfg := bustest.Config(srv.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nc, err := bus.Connect(cfg, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := bus.JetStream(nc)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := bus.EnsureStream(ctx, js, cfg); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.Publish(ctx, cfg.CampaignSubject(7), []byte("x")); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	srv.Start()
	s, err := js.Stream(ctx, cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("stream holds %d messages after restart, want 1", info.State.Msgs)
	}
}

func TestStreamStoresEverySubject(t *testing.T) {
	srv := bustest.NewServer(t)
	cfg := bustest.Config(srv.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nc, err := bus.Connect(cfg, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := bus.JetStream(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := bus.EnsureStream(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, subject := range []string{cfg.CampaignSubject(7), cfg.AutomationSubject(7), cfg.BatchSubject(7)} {
		if _, err := js.Publish(ctx, subject, []byte("x")); err != nil {
			t.Fatalf("publish on %s: %v", subject, err)
		}
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 3 {
		t.Fatalf("stream holds %d messages, want 3", info.State.Msgs)
	}
	if got, want := cfg.BatchSubject(42), cfg.Prefix+".batch.42"; got != want {
		t.Fatalf("BatchSubject %q, want %q", got, want)
	}
	// Each filter matches its own subjects only: the campaign dispatcher's
	// two consumers must not see each other's batches.
	for filter, subject := range map[string]string{cfg.CampaignFilter(): cfg.BatchSubject(7), cfg.BatchFilter(): cfg.CampaignSubject(7)} {
		c, err := js.CreateOrUpdateConsumer(ctx, cfg.Stream, jetstream.ConsumerConfig{FilterSubject: filter, AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			t.Fatal(err)
		}
		ci, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ci.NumPending != 1 {
			t.Fatalf("consumer on %s sees %d batches, want 1 (not %s)", filter, ci.NumPending, subject)
		}
	}
}

func TestParseSubject(t *testing.T) {
	cfg := bus.Config{Prefix: "sends"}
	for subject, want := range map[string]bus.Subject{
		"sends.batch.7":        {Kind: "batch", CompanyID: 7},
		"sends.campaign.7.b-1": {Kind: "campaign", CompanyID: 7, BatchID: "b-1"},
		bus.ForBatch(cfg.AutomationSubject(42), "0192"): {Kind: "automation", CompanyID: 42, BatchID: "0192"},
	} {
		got, err := bus.ParseSubject(subject)
		if err != nil || got != want {
			t.Errorf("ParseSubject(%q) = %+v, %v; want %+v", subject, got, err, want)
		}
	}
	for _, bad := range []string{"x.batch", "a.b.batch.7.x", "sends.campaign.seven", "sends.campaign.7.b.c"} {
		if _, err := bus.ParseSubject(bad); err == nil {
			t.Errorf("ParseSubject(%q) accepted", bad)
		}
	}
	g, err := bus.NewGroupID(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	got, err := bus.ParseSubject(cfg.GroupSubject(bus.KindMessageBatches, g))
	if want := (bus.Subject{Kind: "batch", Grouped: true, Group: g}); err != nil || got != want {
		t.Errorf("ParseSubject(group) = %+v, %v; want %+v", got, err, want)
	}
	if _, err := bus.ParseSubject("sends.batch.g.0011"); err == nil {
		t.Error("ParseSubject accepted a short group id")
	}
}
