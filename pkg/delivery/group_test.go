package delivery

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/record"
)

// A group (the gateway's group commit) is expanded batch by batch: each of
// its batches is recorded as it would be alone, a batch that cannot be
// decoded or does not belong to the group is set aside without holding the
// others back, the group is acked once, and a batch that also comes alone
// under its id (an Idempotency-Key retry of a doubtful hand-off) is sent
// once.
func TestAGroupIsExpandedBatchByBatch(t *testing.T) {
	h := newHarness(t)
	h.clock.Run()
	h.start(record.LaneCampaign, testConfig())
	g, err := bus.NewGroupID(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	var encoded [][]byte
	batches := make([]string, 3)
	for i := range batches {
		ph := phones(20)
		all = append(all, ph...)
		b := h.campaignBatch(ph, false, nil)
		b.BatchId = g.BatchID(i)
		batches[i] = b.BatchId
		data, err := proto.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		encoded = append(encoded, data)
		if i == 1 {
			h.publish(b, "") // the same batch alone, first
		}
	}
	stranger := h.campaignBatch(phones(3), false, nil) // its id names another group
	data, _ := proto.Marshal(stranger)
	encoded = append(encoded, []byte("\xff\xff not protobuf"), data)
	if _, err := h.js.Publish(h.ctx, h.busCfg.GroupSubject(bus.KindCampaignBatches, g), bus.EncodeGroup(nil, encoded),
		jetstream.WithMsgID(g.String())); err != nil {
		t.Fatal(err)
	}
	for _, id := range batches {
		h.waitBatch(id, record.BatchCompleted, 15*time.Second)
		if n := len(h.messages(id)); n != 20 {
			t.Errorf("batch %s has %d messages, want 20", id, n)
		}
	}
	h.waitStreamEmpty(10 * time.Second) // the group acked
	var rejected int
	if err := h.pool.QueryRow(h.ctx, `SELECT count(*) FROM rejected_bus_messages WHERE subject = $1`,
		h.busCfg.GroupSubject(bus.KindCampaignBatches, g)).Scan(&rejected); err != nil || rejected != 2 {
		t.Errorf("%d batches of the group kept as rejected (%v), want 2", rejected, err)
	}
	if n := len(h.messages(stranger.BatchId)); n != 0 {
		t.Errorf("the stranger batch got %d messages", n)
	}
	for _, p := range all {
		if n := h.sends(p); n != 1 {
			t.Errorf("%s was sent %d times, want 1", p, n)
		}
	}
}
