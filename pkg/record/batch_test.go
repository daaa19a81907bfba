package record

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
)

// A batch waiting in the stream is accepted, with no messages yet (every
// state counted zero), its kind and source as the dispatcher will record
// them, and its contacts as the gateway counted them.
func TestPendingBatchOfEachKind(t *testing.T) {
	at := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	later := at.Add(time.Hour)
	cases := []struct {
		name      string
		msg       interface{ GetBatchId() string }
		kind      bus.BatchKind
		contacts  int
		forced    bool
		scheduled *time.Time
	}{
		{"campaign", &sendsv1.CampaignBatch{BatchId: "b1", CompanyId: 7, Phones: []string{"+391", "+392"}, IsForced: true,
			AcceptedAt: timestamppb.New(at), ScheduledAt: timestamppb.New(later)}, bus.BatchCampaign, 2, true, &later},
		{"segment", &sendsv1.CampaignBatch{BatchId: "b2", CompanyId: 7, SegmentId: 3, SegmentSize: 40,
			AcceptedAt: timestamppb.New(at)}, bus.BatchCampaign, 40, false, nil},
		{"automation", &sendsv1.AutomationBatch{BatchId: "b3", CompanyId: 7,
			Contacts: []*sendsv1.AutomationContact{{Phone: "+391"}}, AcceptedAt: timestamppb.New(at)}, bus.BatchAutomation, 1, true, nil},
		{"messages", &sendsv1.MessageBatch{BatchId: "b4", CompanyId: 7,
			Messages: []*sendsv1.BatchMessage{{Phone: "+391"}, {Phone: "+392"}, {Phone: "+393"}}, AcceptedAt: timestamppb.New(at)}, bus.BatchMessages, 3, false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := Pending(7, c.msg.(proto.Message))
			if err != nil {
				t.Fatal(err)
			}
			if b.ID != c.msg.GetBatchId() || b.CompanyID != 7 || b.Kind != c.kind || b.Status != BatchAccepted ||
				b.ContactCount != c.contacts || b.IsForced != c.forced || !b.AcceptedAt.Equal(at) {
				t.Fatalf("pending batch %+v", b)
			}
			if (b.ScheduledAt == nil) != (c.scheduled == nil) || (b.ScheduledAt != nil && !b.ScheduledAt.Equal(*c.scheduled)) {
				t.Fatalf("scheduled at %v, want %v", b.ScheduledAt, c.scheduled)
			}
			if len(b.Counts) != len(States) {
				t.Fatalf("counts %v: every state must be there", b.Counts)
			}
			for s, n := range b.Counts {
				if n != 0 {
					t.Fatalf("%s counted %d", s, n)
				}
			}
		})
	}
}

// A cancelled batch without messages yet (cancelled in the stream) counts
// its contacts as cancelled; once it has messages, they are what counts.
func TestCountedCancelledBeforeExpansion(t *testing.T) {
	b := Batch{Status: BatchCancelled, ContactCount: 5}.counted(nil)
	if b.Counts[StateCancelled] != 5 {
		t.Fatalf("counts %v, want 5 cancelled", b.Counts)
	}
	b = Batch{Status: BatchCancelled, ContactCount: 5}.counted(map[State]int{StateSent: 1, StateCancelled: 4})
	if b.Counts[StateCancelled] != 4 || b.Counts[StateSent] != 1 || len(b.Counts) != len(States) {
		t.Fatalf("counts %v", b.Counts)
	}
}
