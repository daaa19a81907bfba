package accept_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/services/gateway/internal/accept"
	"github.com/parleyhq/parley/testkit/bustest"
)

type env struct {
	srv    *bustest.Server
	cfg    bus.Config
	p      *accept.Publisher
	stream jetstream.Stream
}

func newEnv(t *testing.T, inFlight int) *env { return newEnvMax(t, inFlight, 64) }

func newEnvMax(t *testing.T, inFlight, maxBatches int) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv := bustest.NewServer(t)
	cfg := bustest.Config(srv.URL())
	nc, err := bus.Connect(cfg, "test", nats.ReconnectBufSize(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	p, err := accept.New(nc, cfg, accept.Options{MaxPending: 4096, Timeout: 2 * time.Second, GroupsInFlight: inFlight, GroupMaxBatches: maxBatches})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := bus.EnsureStream(ctx, p.JetStream(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{srv: srv, cfg: cfg, p: p, stream: stream}
}

func (e *env) msgs(t *testing.T) uint64 {
	t.Helper()
	info, err := e.stream.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// A batch whose id is known (a retry of a doubtful publish) is published
// alone under it, and the same id twice is stored once.
func TestPublishAloneWaitsForTheAckAndDeduplicates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e := newEnv(t, 2)
	m := &sendsv1.CampaignBatch{BatchId: "b1", CompanyId: 7, CampaignId: 3, Phones: []string{"+393331234567"}}
	for range 2 {
		id, err := e.p.Publish(ctx, bus.KindCampaignBatches, 7, "b1", m)
		if err != nil || id != "b1" {
			t.Fatalf("publish = %q, %v", id, err)
		}
	}
	if n := e.msgs(t); n != 1 {
		t.Fatalf("stream holds %d messages, want 1", n)
	}
	raw, err := e.stream.GetLastMsgForSubject(ctx, bus.ForBatch(e.cfg.CampaignSubject(7), "b1"))
	if err != nil {
		t.Fatal(err)
	}
	var got sendsv1.CampaignBatch
	if err := proto.Unmarshal(raw.Data, &got); err != nil || !proto.Equal(&got, m) || raw.Header.Get("Nats-Msg-Id") != "b1" {
		t.Fatalf("stored %v (msg id %q), %v", &got, raw.Header.Get("Nats-Msg-Id"), err)
	}

	// NATS away: the publish fails at once instead of waiting in a buffer,
	// and a new batch gets no id (it cannot be in the stream).
	e.srv.Stop()
	start := time.Now()
	// A known id (a retry) is returned all the same: the next retry reuses it.
	id, err := e.p.Publish(ctx, bus.KindCampaignBatches, 7, "b2", m)
	if !errors.Is(err, accept.ErrUnavailable) || id != "b2" {
		t.Fatalf("publish with NATS down: %q, %v", id, err)
	}
	id, err = e.p.Publish(ctx, bus.KindCampaignBatches, 7, "", &sendsv1.CampaignBatch{CompanyId: 7})
	if !errors.Is(err, accept.ErrUnavailable) || id != "" {
		t.Fatalf("group publish with NATS down: %q, %v", id, err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("publishes with NATS down took %s", d)
	}
	e.srv.Start()
}

// A lone batch is published at once, as a group of one: nothing waits for
// company.
func TestALoneBatchIsAGroupOfOne(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e := newEnv(t, 1)
	m := &sendsv1.AutomationBatch{CompanyId: 5, AutomationId: 8}
	id, err := e.p.Publish(ctx, bus.KindAutomationBatches, 5, "", m)
	if err != nil {
		t.Fatal(err)
	}
	g, index, ok := bus.GroupOf(id)
	if !ok || index != 0 {
		t.Fatalf("id %s: group %s index %d", id, g, index)
	}
	raw, err := e.stream.GetLastMsgForSubject(ctx, e.cfg.GroupSubject(bus.KindAutomationBatches, g))
	if err != nil {
		t.Fatal(err)
	}
	batches, err := bus.DecodeGroup(raw.Data)
	if err != nil || len(batches) != 1 || raw.Header.Get("Nats-Msg-Id") != g.String() {
		t.Fatalf("group of %d batches (msg id %q), %v", len(batches), raw.Header.Get("Nats-Msg-Id"), err)
	}
	found, kind, err := e.cfg.FindBatch(ctx, e.stream, 5, id)
	if err != nil || kind != bus.KindAutomationBatches || found.(*sendsv1.AutomationBatch).GetAutomationId() != 8 || found.GetBatchId() != id {
		t.Fatalf("FindBatch = %v %q %v", found, kind, err)
	}
}

// Many concurrent requests: every one is answered with its own id, every
// batch is in the stream exactly once, findable by its id with its own
// content, in fewer stream messages than batches.
func TestConcurrentBatchesAreCommittedInGroups(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e := newEnv(t, 1)
	const n = 400
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := &sendsv1.CampaignBatch{CompanyId: int64(1 + i%7), CampaignId: int64(i), Phones: []string{"+3933312345"}}
			ids[i], errs[i] = e.p.Publish(ctx, bus.KindCampaignBatches, m.CompanyId, "", m)
		}()
	}
	wg.Wait()
	seen := map[string]int{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("batch %d: %v", i, errs[i])
		}
		if _, dup := seen[ids[i]]; dup {
			t.Fatalf("batches %d and %d got the same id %s", seen[ids[i]], i, ids[i])
		}
		seen[ids[i]] = i
		b, _, err := e.cfg.FindBatch(ctx, e.stream, int64(1+i%7), ids[i])
		if err != nil || b.(*sendsv1.CampaignBatch).GetCampaignId() != int64(i) {
			t.Fatalf("FindBatch(%s) = %v, %v; want campaign %d", ids[i], b, err, i)
		}
	}
	msgs := e.msgs(t)
	// Every stored batch, read from the stream in order: each id once.
	stored := 0
	for seq := uint64(1); seq <= msgs; seq++ {
		raw, err := e.stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		batches, err := bus.DecodeGroup(raw.Data)
		if err != nil {
			t.Fatal(err)
		}
		if len(batches) > 64 {
			t.Errorf("a group of %d batches, over GroupMaxBatches 64", len(batches))
		}
		for _, data := range batches {
			var b sendsv1.CampaignBatch
			if err := proto.Unmarshal(data, &b); err != nil {
				t.Fatal(err)
			}
			if _, ok := seen[b.GetBatchId()]; !ok {
				t.Fatalf("stored batch %s was answered to no request (or twice)", b.GetBatchId())
			}
			delete(seen, b.GetBatchId())
			stored++
		}
	}
	if stored != n || len(seen) != 0 {
		t.Fatalf("%d batches stored, %d answered ids not found", stored, len(seen))
	}
	t.Logf("%d batches in %d stream messages", n, msgs)
	if msgs >= n {
		t.Errorf("%d batches took %d stream messages: nothing was grouped", n, msgs)
	}
}

// A group the stream does not take (no stream on its subjects): each of its
// requests fails with ErrUnavailable and keeps its id, since the publish
// is in doubt in general.
func TestAGroupThatFailsFailsEachRequest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e := newEnv(t, 1)
	if err := e.p.JetStream().DeleteStream(ctx, e.cfg.Stream); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := e.p.Publish(ctx, bus.KindMessageBatches, 3, "", &sendsv1.MessageBatch{CompanyId: 3})
			if !errors.Is(err, accept.ErrUnavailable) || id == "" {
				t.Errorf("publish without a stream = %q, %v", id, err)
			}
		}()
	}
	wg.Wait()
}

// GroupMaxBatches 1 turns the group commit off: a stream message per
// batch, none waiting for another's ack.
func TestGroupCommitOff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e := newEnvMax(t, 1, 1)
	const n = 100
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := e.p.Publish(ctx, bus.KindCampaignBatches, 2, "", &sendsv1.CampaignBatch{CompanyId: 2, CampaignId: int64(i)})
			if err != nil {
				t.Error(err)
				return
			}
			if _, index, _ := bus.GroupOf(id); index != 0 {
				t.Errorf("batch %s is number %d of its group", id, index)
			}
		}()
	}
	wg.Wait()
	if msgs := e.msgs(t); msgs != n {
		t.Fatalf("%d batches in %d stream messages, want one each", n, msgs)
	}
}

// A group id drawn twice (58 random bits per millisecond, so never in
// practice): JetStream reports the second publish as a duplicate, and its
// request gets ErrUnavailable, not an id for a batch that was not stored.
func TestAGroupIDDrawnTwiceFailsTheSecondGroup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, maxBatches := range []int{1, 64} { // the group commit off and on
		e := newEnvMax(t, 1, maxBatches)
		g, err := bus.NewGroupID(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		accept.SetGroupIDs(e.p, func(time.Time) (bus.GroupID, error) { return g, nil })
		first, err := e.p.Publish(ctx, bus.KindCampaignBatches, 1, "", &sendsv1.CampaignBatch{CompanyId: 1, CampaignId: 1})
		if err != nil || first != g.BatchID(0) {
			t.Fatalf("max %d: first group: %q, %v", maxBatches, first, err)
		}
		if _, err := e.p.Publish(ctx, bus.KindCampaignBatches, 1, "", &sendsv1.CampaignBatch{CompanyId: 1, CampaignId: 2}); !errors.Is(err, accept.ErrUnavailable) {
			t.Fatalf("max %d: a second group under the same id: %v, want ErrUnavailable", maxBatches, err)
		}
		b, _, err := e.cfg.FindBatch(ctx, e.stream, 1, first)
		if err != nil || b.(*sendsv1.CampaignBatch).GetCampaignId() != 1 {
			t.Fatalf("max %d: the first group's batch: %v, %v", maxBatches, b, err)
		}
		if n := e.msgs(t); n != 1 {
			t.Fatalf("max %d: %d stream messages, want 1", maxBatches, n)
		}
	}
}
