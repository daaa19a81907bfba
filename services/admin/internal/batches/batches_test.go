package batches

import (
	"testing"
	"time"
)

func TestTimelineEnd(t *testing.T) {
	t0 := time.Date(2025, 6, 2, 9, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	now := t0.Add(time.Hour)
	for _, tc := range []struct {
		name   string
		b      Batch
		last   *time.Time
		now    time.Time
		points int
		want   time.Duration
	}{
		{"under way: to now", Batch{Status: "processing"}, at(30 * time.Second), now, 60, time.Hour},
		{"accepted, nothing yet: to now", Batch{Status: "accepted"}, nil, now, 60, time.Hour},
		{"completed after its last change: to completed_at", Batch{Status: "completed", CompletedAt: at(80 * time.Second)},
			at(40 * time.Second), now, 4, 80 * time.Second},
		{"cancelled after its last change: to cancelled_at", Batch{Status: "cancelled", CancelledAt: at(2 * time.Minute),
			CompletedAt: at(2 * time.Minute)}, at(30 * time.Second), now, 4, 2 * time.Minute},
		{"read after it completed: the last change and a step", Batch{Status: "completed", CompletedAt: at(26 * time.Second)},
			at(30 * time.Second), now, 6, 36 * time.Second},
		{"ended at its last change: held a step", Batch{Status: "completed", CompletedAt: at(40 * time.Second)},
			at(40 * time.Second), now, 5, 50 * time.Second},
		{"the step never passes now", Batch{Status: "completed", CompletedAt: at(26 * time.Second)},
			at(30 * time.Second), t0.Add(31 * time.Second), 6, 31 * time.Second},
		{"failed at expansion, no messages: to its end", Batch{Status: "failed", CompletedAt: at(time.Second)}, nil, now, 60, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.b.AcceptedAt = t0
			if got := timelineEnd(tc.b, tc.last, tc.now, tc.points); !got.Equal(t0.Add(tc.want)) {
				t.Errorf("ends at %v, want %v", got.Sub(t0), tc.want)
			}
		})
	}
}
