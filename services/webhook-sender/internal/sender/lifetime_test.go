package sender

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/events"
)

// TestFanOutAgainInAnotherWeekMakesNoSecondDelivery: the same events come
// back on the stream (without the Nats-Msg-Id that makes the stream drop
// them) with an occurred_at a week earlier. Their deliveries are filed
// under the time in their ids, not occurred_at: the unique key catches
// them, and nothing is sent twice.
func TestFanOutAgainInAnotherWeekMakesNoSecondDelivery(t *testing.T) {
	h := newHarness(t)
	acme := h.company("acme")
	h.endpoint(acme, "a")
	h.start(testConfig(), true)
	ids := h.emit(acme, events.MessageSent, 10)
	eventually(t, 10*time.Second, "delivered", func() bool {
		return h.recv.Stats("a").Unique == 10 && h.count(`SELECT count(*) FROM webhook_deliveries WHERE status = 'succeeded'`) == 10
	})
	for _, id := range ids {
		b, err := json.Marshal(StreamEvent{ID: id, CompanyID: acme, Type: string(events.MessageSent),
			OccurredAt: time.Now().AddDate(0, 0, -8), Data: json.RawMessage(`{"phone":"+393331234567"}`)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.js.Publish(h.ctx, Subject(h.bus.Prefix, acme), b); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "the repeats fanned out", func() bool {
		cons, err := h.js.Consumer(h.ctx, h.bus.Stream+"_EV", ConsumerName)
		if err != nil {
			return false
		}
		info, err := cons.Info(h.ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.Delivered.Consumer >= 20
	})
	time.Sleep(300 * time.Millisecond)
	if n := h.count(`SELECT count(*) FROM webhook_deliveries`); n != 10 {
		t.Fatalf("%d deliveries, want 10", n)
	}
	if st := h.recv.Stats("a"); st.Accepted != 10 {
		t.Fatalf("accepted %d, want 10", st.Accepted)
	}
}
