package record_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/testkit/bustest"
)

// A batch waiting in the stream is found, in a group or alone, only for its
// company; a stream that cannot be read is said so, not taken for absence.
func TestStreamBatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv := bustest.NewServer(t)
	cfg := bustest.Config(srv.URL())
	nc, err := bus.Connect(cfg, "stream-test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}

	missing := record.NewStream(js, cfg)
	if _, err := missing.Batch(ctx, 10, uuid.Must(uuid.NewV7()).String()); !errors.Is(err, record.ErrStreamUnreadable) {
		t.Fatalf("no stream: %v, want ErrStreamUnreadable", err)
	}

	if _, err := bus.EnsureStream(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	accepted := time.Date(2025, 6, 2, 9, 0, 0, 0, time.UTC)
	g, err := bus.NewGroupID(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var encoded [][]byte
	for i := range 2 {
		raw, _ := proto.Marshal(&sendsv1.CampaignBatch{CompanyId: int64(10 + i), CampaignId: 7, Phones: []string{"+393331234567"},
			AcceptedAt: timestamppb.New(accepted), Source: string(bus.SourceCampaignsSend)})
		encoded = append(encoded, bus.WithBatchID(raw, g.BatchID(i)))
	}
	if _, err := js.Publish(ctx, cfg.GroupSubject(bus.KindCampaignBatches, g), bus.EncodeGroup(nil, encoded), jetstream.WithMsgID(g.String())); err != nil {
		t.Fatal(err)
	}
	alone := uuid.Must(uuid.NewV7()).String()
	raw, _ := proto.Marshal(&sendsv1.MessageBatch{BatchId: alone, CompanyId: 20, AcceptedAt: timestamppb.New(accepted),
		Messages: []*sendsv1.BatchMessage{{}, {}}})
	if _, err := js.Publish(ctx, bus.ForBatch(cfg.BatchSubject(20), alone), raw, jetstream.WithMsgID(alone)); err != nil {
		t.Fatal(err)
	}

	s := record.NewStream(js, cfg)
	b, err := s.Batch(ctx, 11, g.BatchID(1))
	if err != nil || b.ID != g.BatchID(1) || b.CompanyID != 11 || b.Kind != bus.BatchCampaign || b.Status != record.BatchAccepted ||
		b.ContactCount != 1 || b.CampaignID == nil || *b.CampaignID != 7 || !b.AcceptedAt.Equal(accepted) {
		t.Fatalf("in its group: %+v, %v", b, err)
	}
	if b, err := s.Batch(ctx, 20, alone); err != nil || b.ID != alone || b.Kind != bus.BatchMessages || b.ContactCount != 2 {
		t.Fatalf("alone: %+v, %v", b, err)
	}
	for _, tc := range []struct {
		company int64
		id      string
	}{{10, g.BatchID(1)}, {21, alone}, {20, uuid.Must(uuid.NewV7()).String()}, {20, "not-a-batch"}} {
		if _, err := s.Batch(ctx, tc.company, tc.id); !errors.Is(err, record.ErrNotFound) {
			t.Errorf("company %d, batch %s: %v, want ErrNotFound", tc.company, tc.id, err)
		}
	}
}

// TestReplyMessageID: a reply's message id is found in the stream while it
// waits there, in the record once expanded, and nowhere for a batch never
// published, or another company's.
func TestReplyMessageID(t *testing.T) {
	f := newFixture(t)
	ctx := f.ctx
	srv := bustest.NewServer(t)
	cfg := bustest.Config(srv.URL())
	nc, err := bus.Connect(cfg, "reply-test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bus.EnsureStream(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	s := record.NewStream(js, cfg)
	var msgID int64
	if err := f.pool.QueryRow(ctx, `SELECT nextval('messages_id_seq')`).Scan(&msgID); err != nil {
		t.Fatal(err)
	}
	id := uuid.Must(uuid.NewV7()).String()
	b := &sendsv1.ReplyBatch{BatchId: id, CompanyId: f.comp.ID, MessageId: msgID, Phone: "+14155550900",
		MessagingAccountId: f.camp.MessagingAccountID, TemplateId: f.camp.TemplateID, AcceptedAt: timestamppb.New(f.now)}
	raw, _ := proto.Marshal(b)
	if _, err := js.Publish(ctx, bus.ForBatch(cfg.CompanySubject(bus.KindReplyBatches, f.comp.ID), id), raw, jetstream.WithMsgID(id)); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := record.ReplyMessageID(ctx, f.pool, s, f.comp.ID, id); err != nil || !ok || got != msgID {
		t.Fatalf("in the stream: %d %v %v, want %d", got, ok, err, msgID)
	}
	if _, ok, err := record.ReplyMessageID(ctx, f.pool, s, f.other.ID, id); err != nil || ok {
		t.Fatalf("another company's: %v %v", ok, err)
	}
	if _, ok, err := record.ReplyMessageID(ctx, f.pool, s, f.comp.ID, uuid.Must(uuid.NewV7()).String()); err != nil || ok {
		t.Fatalf("never published: %v %v", ok, err)
	}
	if _, err := f.exp.Reply(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := record.ReplyMessageID(ctx, f.pool, nil, f.comp.ID, id); err != nil || !ok || got != msgID {
		t.Fatalf("recorded: %d %v %v, want %d", got, ok, err, msgID)
	}
}
