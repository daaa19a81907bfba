package handoff_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/services/gateway/internal/handoff"
	"github.com/parleyhq/parley/testkit/bustest"
)

func TestPublishWaitsForTheAckAndDeduplicates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv := bustest.NewServer(t)
	cfg := bustest.Config(srv.URL())
	nc, err := bus.Connect(cfg, "test", nats.ReconnectBufSize(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	p, err := handoff.New(nc, 256, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := bus.EnsureStream(ctx, p.JetStream(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := &sendsv1.CampaignBatch{BatchId: "b1", CompanyId: 7, CampaignId: 3, Phones: []string{"+393331234567"}}
	for range 2 { // the same batch id twice is stored once
		if err := p.Publish(ctx, cfg.CampaignSubject(7), "b1", m); err != nil {
			t.Fatal(err)
		}
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("stream holds %d messages, want 1", info.State.Msgs)
	}
	raw, err := stream.GetLastMsgForSubject(ctx, cfg.CampaignSubject(7))
	if err != nil {
		t.Fatal(err)
	}
	var got sendsv1.CampaignBatch
	if err := proto.Unmarshal(raw.Data, &got); err != nil || !proto.Equal(&got, m) || raw.Header.Get("Nats-Msg-Id") != "b1" {
		t.Fatalf("stored %v (msg id %q), %v", &got, raw.Header.Get("Nats-Msg-Id"), err)
	}

	// NATS away: the publish fails at once instead of waiting in a buffer.
	srv.Stop()
	start := time.Now()
	err = p.Publish(ctx, cfg.CampaignSubject(7), "b2", m)
	if !errors.Is(err, handoff.ErrUnavailable) {
		t.Fatalf("publish with NATS down: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("publish with NATS down took %s", d)
	}
	srv.Start()
}
