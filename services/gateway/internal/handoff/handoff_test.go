package handoff_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/bustest"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/store/storetest"
	"github.com/parleyhq/parley/services/gateway/internal/handoff"
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

func TestRecorderWritesAcceptedBatches(t *testing.T) {
	ctx := context.Background()
	_, pool := storetest.NewDatabase(t)
	var company, campaign int64
	if err := pool.QueryRow(ctx, `INSERT INTO companies (slug, name) VALUES ('acme','Acme') RETURNING id`).Scan(&company); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `
		WITH t AS (INSERT INTO templates (company_id, name) VALUES ($1, 'hello') RETURNING id),
		     a AS (INSERT INTO messaging_accounts (company_id, name, phone_number_id, access_token_encrypted) VALUES ($1, 'm', '1', '\x00') RETURNING id)
		INSERT INTO campaigns (company_id, name, template_id, messaging_account_id) SELECT $1, 'c', t.id, a.id FROM t, a RETURNING id`, company).Scan(&campaign); err != nil {
		t.Fatal(err)
	}
	r := handoff.NewRecorder(pool, 16, prometheus.NewRegistry(), zap.NewNop())
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { r.Run(runCtx); close(done) }()
	now := time.Now().UTC().Truncate(time.Microsecond)
	sched := now.Add(time.Hour)
	r.Record(handoff.Accepted{ID: "0192f5d0-0000-7000-8000-000000000001", CompanyID: company, Kind: "campaign", Source: "api:campaigns_send",
		CampaignID: campaign, ContactCount: 2, ScheduledAt: &sched, IdempotencyKey: "k", AcceptedAt: now})
	r.Record(handoff.Accepted{ID: "0192f5d0-0000-7000-8000-000000000001", CompanyID: company, Kind: "campaign", Source: "dup", AcceptedAt: now})
	stop()
	<-done
	var source, status, key string
	var count int
	var at time.Time
	if err := pool.QueryRow(ctx, `SELECT source, status::text, contact_count, idempotency_key, scheduled_at FROM batches`).Scan(&source, &status, &count, &key, &at); err != nil {
		t.Fatal(err)
	}
	if source != "api:campaigns_send" || status != "accepted" || count != 2 || key != "k" || !at.Equal(sched) {
		t.Fatalf("row = %s %s %d %s %s", source, status, count, key, at)
	}
}
