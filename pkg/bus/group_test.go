package bus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/testkit/bustest"
)

func TestGroupIDsAreUUIDv7AndNameTheirGroup(t *testing.T) {
	at := time.Date(2026, 11, 26, 15, 0, 0, 0, time.UTC)
	g, err := bus.NewGroupID(at)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := bus.NewGroupID(at)
	if g == other {
		t.Fatal("two group ids of one millisecond are equal")
	}
	seen := map[string]bool{}
	for _, i := range []int{0, 1, 255, 256, bus.MaxGroup - 1} {
		id := g.BatchID(i)
		u, err := uuid.Parse(id)
		if err != nil {
			t.Fatal(err)
		}
		if u.Version() != 7 || u.Variant() != uuid.RFC4122 {
			t.Errorf("%s: version %d variant %v, want 7 RFC 4122", id, u.Version(), u.Variant())
		}
		sec, nsec := u.Time().UnixTime()
		if got := time.Unix(sec, nsec); !got.Equal(at) {
			t.Errorf("%s: time %s, want %s", id, got, at)
		}
		gotG, gotI, ok := bus.GroupOf(id)
		if !ok || gotG != g || gotI != i {
			t.Errorf("GroupOf(%s) = %s %d %v, want %s %d", id, gotG, gotI, ok, g, i)
		}
		seen[id] = true
	}
	if len(seen) != 5 {
		t.Errorf("batch ids of one group repeat: %v", seen)
	}
	if _, _, ok := bus.GroupOf("not-a-uuid"); ok {
		t.Error("GroupOf accepted a non-UUID")
	}
}

// A batch encoded without its id and given one afterwards (as the group
// commit does) decodes as the batch with that id.
func TestWithBatchIDAndGroupsRoundTrip(t *testing.T) {
	a := &sendsv1.CampaignBatch{CompanyId: 3, CampaignId: 9, Phones: []string{"+14155550100"}}
	b := &sendsv1.CampaignBatch{CompanyId: 4, CampaignId: 1, Phones: []string{"+14155550101", "+14155550102"}}
	var encoded [][]byte
	for i, m := range []*sendsv1.CampaignBatch{a, b} {
		raw, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		encoded = append(encoded, bus.WithBatchID(raw, "id-"+string(rune('a'+i))))
	}
	data := bus.EncodeGroup(nil, encoded)
	if got, want := len(data), bus.GroupSize(len(encoded[0]), len(encoded[1])); got != want {
		t.Errorf("group of %d bytes, GroupSize says %d", got, want)
	}
	batches, err := bus.DecodeGroup(data)
	if err != nil || len(batches) != 2 {
		t.Fatalf("DecodeGroup = %d, %v", len(batches), err)
	}
	for i, want := range []*sendsv1.CampaignBatch{a, b} {
		var got sendsv1.CampaignBatch
		if err := proto.Unmarshal(batches[i], &got); err != nil {
			t.Fatal(err)
		}
		want.BatchId = "id-" + string(rune('a'+i))
		if !proto.Equal(&got, want) {
			t.Errorf("batch %d = %v, want %v", i, &got, want)
		}
	}
}

// FindBatch finds a batch in its group, or alone on its own subject, and
// only for its own company.
func TestFindBatchInAGroupAndAlone(t *testing.T) {
	srv := bustest.NewServer(t)
	cfg := bustest.Config(srv.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nc, err := bus.Connect(cfg, "find")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := bus.EnsureStream(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	g, err := bus.NewGroupID(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var encoded [][]byte
	for i := range 3 {
		raw, _ := proto.Marshal(&sendsv1.AutomationBatch{CompanyId: int64(10 + i), AutomationId: int64(i + 1)})
		encoded = append(encoded, bus.WithBatchID(raw, g.BatchID(i)))
	}
	if _, err := js.Publish(ctx, cfg.GroupSubject(bus.KindAutomationBatches, g), bus.EncodeGroup(nil, encoded), jetstream.WithMsgID(g.String())); err != nil {
		t.Fatal(err)
	}
	alone, _ := uuid.NewV7()
	raw, _ := proto.Marshal(&sendsv1.MessageBatch{BatchId: alone.String(), CompanyId: 20})
	if _, err := js.Publish(ctx, bus.ForBatch(cfg.BatchSubject(20), alone.String()), raw, jetstream.WithMsgID(alone.String())); err != nil {
		t.Fatal(err)
	}

	b, kind, err := cfg.FindBatch(ctx, s, 11, g.BatchID(1))
	if err != nil || kind != bus.KindAutomationBatches || b.(*sendsv1.AutomationBatch).GetAutomationId() != 2 {
		t.Errorf("FindBatch(group, 1) = %v %q %v", b, kind, err)
	}
	b, kind, err = cfg.FindBatch(ctx, s, 20, alone.String())
	if err != nil || kind != bus.KindMessageBatches || b.GetBatchId() != alone.String() {
		t.Errorf("FindBatch(alone) = %v %q %v", b, kind, err)
	}
	for _, tc := range []struct {
		company int64
		id      string
	}{
		{10, g.BatchID(1)}, // another company's batch
		{12, g.BatchID(3)}, // past the group's end
		{21, alone.String()},
		{20, "nope"},
	} {
		if _, _, err := cfg.FindBatch(ctx, s, tc.company, tc.id); !errors.Is(err, bus.ErrBatchNotInStream) {
			t.Errorf("FindBatch(%d, %s) = %v, want ErrBatchNotInStream", tc.company, tc.id, err)
		}
	}
}
