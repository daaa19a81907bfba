package sender

import (
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/events"
	"github.com/parleyhq/parley/pkg/webhooks"
	"github.com/parleyhq/parley/pkg/webhooks/webhooksim"
)

func TestEveryEventReachesEverySubscribedEndpointSigned(t *testing.T) {
	h := newHarness(t)
	acme, other := h.company("acme"), h.company("other")
	h.endpoint(acme, "all")
	h.endpoint(acme, "failed-only", "message.failed")
	h.endpoint(other, "other")
	h.start(testConfig(), true)

	sent := h.emit(acme, events.MessageSent, 300)
	failed := h.emit(acme, events.MessageFailed, 20)
	eventually(t, 20*time.Second, "every event delivered", func() bool {
		return h.recv.Stats("all").Unique == 320 && h.recv.Stats("failed-only").Unique == 20
	})
	all := h.recv.Counts("all")
	for _, id := range append(sent, failed...) {
		if all[id] < 1 {
			t.Fatalf("event %s not received", id)
		}
	}
	only := h.recv.Counts("failed-only")
	for _, id := range failed {
		if only[id] != 1 {
			t.Fatalf("failed event %s received %d times by its subscriber", id, only[id])
		}
	}
	for _, name := range []string{"all", "failed-only", "other"} {
		if st := h.recv.Stats(name); st.BadSignature != 0 {
			t.Fatalf("%s: %d bad signatures", name, st.BadSignature)
		}
	}
	if st := h.recv.Stats("other"); st.Requests != 0 {
		t.Fatalf("another company's endpoint got %d requests", st.Requests)
	}
	eventually(t, 10*time.Second, "deliveries recorded", func() bool {
		return h.count(`SELECT count(*) FROM webhook_deliveries WHERE status = 'succeeded' AND attempts = 1`) == 340
	})
	if n := h.count(`SELECT count(*) FROM event_outbox`); n != 0 {
		t.Fatalf("%d events left in the outbox", n)
	}
	if n := h.count(`SELECT count(*) FROM webhook_attempts WHERE status = 'succeeded' AND response_code = 204`); n != 340 {
		t.Fatalf("%d attempts recorded, want 340", n)
	}
}

func TestRetriesOn500And429ThenDelivers(t *testing.T) {
	h := newHarness(t)
	acme := h.company("acme")
	ep := h.endpoint(acme, "flaky")
	h.recv.SetMode("flaky", webhooksim.Mode500, 0)
	h.start(testConfig(), true)
	ids := h.emit(acme, events.MessageDelivered, 5)
	eventually(t, 10*time.Second, "failed attempts recorded", func() bool {
		return h.count(`SELECT count(DISTINCT delivery_id) FROM webhook_attempts WHERE status = 'failed' AND response_code = 500`) == 5
	})
	// 429 with a Retry-After of 2 s: the next attempt waits at least that.
	h.recv.SetMode("flaky", webhooksim.Mode429, 2)
	eventually(t, 10*time.Second, "429 recorded", func() bool {
		return h.count(`SELECT count(*) FROM webhook_attempts WHERE response_code = 429`) >= 1
	})
	if n := h.count(`
		SELECT count(*) FROM webhook_deliveries d JOIN webhook_attempts a ON a.delivery_id = d.id AND a.response_code = 429
		WHERE d.status = 'pending' AND d.next_attempt_at < a.attempted_at + interval '1900 ms'
		  AND a.id = (SELECT max(id) FROM webhook_attempts WHERE delivery_id = d.id)`); n != 0 {
		t.Fatalf("%d deliveries retried sooner than Retry-After", n)
	}
	h.recv.SetMode("flaky", webhooksim.ModeOK, 0)
	eventually(t, 15*time.Second, "delivered after the failures", func() bool { return h.recv.Stats("flaky").Unique == 5 })
	for _, id := range ids {
		if h.recv.Counts("flaky")[id] != 1 {
			t.Fatalf("event %s accepted %d times", id, h.recv.Counts("flaky")[id])
		}
	}
	eventually(t, 5*time.Second, "streak cleared", func() bool {
		return h.count(`SELECT count(*) FROM webhook_endpoints WHERE id = $1 AND failing_since IS NULL AND last_error <> ''`, ep.ID) == 1
	})
	eventually(t, 5*time.Second, "deliveries recorded succeeded after retries", func() bool {
		return h.count(`SELECT count(*) FROM webhook_deliveries WHERE status = 'succeeded' AND attempts >= 2`) == 5
	})
}

func TestGivesUpAfterTheRetryPeriodAndDisablesTheEndpoint(t *testing.T) {
	h := newHarness(t)
	acme := h.company("acme")
	ep := h.endpoint(acme, "dead")
	h.recv.SetMode("dead", webhooksim.Mode500, 0)
	cfg := testConfig()
	cfg.RetryPeriod = 500 * time.Millisecond
	cfg.DisableAfter = time.Second
	h.start(cfg, true)
	h.emit(acme, events.MessageSent, 3)
	eventually(t, 15*time.Second, "deliveries failed", func() bool {
		return h.count(`SELECT count(*) FROM webhook_deliveries WHERE status = 'failed' AND last_error = 'HTTP 500'`) == 3
	})
	// Failures that go on past DisableAfter disable the endpoint.
	eventually(t, 15*time.Second, "endpoint disabled", func() bool {
		got, err := h.store.Get(h.ctx, acme, ep.ID)
		if err == nil && !got.Enabled && got.DisabledReason != "" && got.LastError != "" && got.DisabledAt != nil {
			return true
		}
		h.emit(acme, events.MessageSent, 1)
		time.Sleep(100 * time.Millisecond)
		return false
	})
	eventually(t, 5*time.Second, "nothing pending for a disabled endpoint", func() bool {
		return h.count(`SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'`) == 0
	})
	failed := h.count(`SELECT count(*) FROM webhook_deliveries WHERE status = 'failed'`)
	if total := h.count(`SELECT count(*) FROM webhook_deliveries`); failed != total || failed < 4 {
		t.Fatalf("%d failed deliveries of %d", failed, total)
	}
	// Re-enabled and replayed, they are delivered.
	h.recv.SetMode("dead", webhooksim.ModeOK, 0)
	if _, err := h.store.Enable(h.ctx, acme, ep.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := h.store.ReplayFailed(h.ctx, acme, ep.ID, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil || int(n) != failed {
		t.Fatalf("replay = %d, %v; want %d", n, err, failed)
	}
	eventually(t, 10*time.Second, "replayed deliveries received", func() bool { return h.recv.Stats("dead").Unique == failed })
}

func TestTestEventIsSent(t *testing.T) {
	h := newHarness(t)
	acme := h.company("acme")
	ep := h.endpoint(acme, "a")
	h.start(testConfig(), true)
	d, err := h.store.SendTest(h.ctx, acme, ep.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "test event received", func() bool { return h.recv.Counts("a")[d.EventID] == 1 })
}

func TestHangingEndpointDoesNotDelayAnother(t *testing.T) {
	h := newHarness(t)
	slow, fast := h.company("slow"), h.company("fast")
	h.endpoint(slow, "hang")
	h.recv.SetMode("hang", webhooksim.ModeHang, 0)
	h.endpoint(fast, "fast")
	cfg := testConfig()
	cfg.Timeout = time.Minute // longer than the test waits for the other
	_, stop := h.start(cfg, true)
	h.emit(slow, events.MessageSent, 300) // more than its queue and workers hold
	h.emit(fast, events.MessageSent, 100)
	eventually(t, 20*time.Second, "the other company's events delivered", func() bool { return h.recv.Stats("fast").Unique == 100 })
	if st := h.recv.Stats("hang"); st.Accepted != 0 {
		t.Fatalf("hanging endpoint accepted %d", st.Accepted)
	}
	// The requests still hanging do not hold the shutdown past
	// ShutdownTimeout (5 s here), though each may take a minute.
	start := time.Now()
	stop()
	if d := time.Since(start); d > cfg.Timeout/2 {
		t.Fatalf("the sender took %s to stop with requests hanging; ShutdownTimeout is %s", d, cfg.ShutdownTimeout)
	}
	// What was aborted is still to be delivered.
	if n := h.count(`SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'`); n == 0 {
		t.Fatal("no delivery left to retry after the aborted requests")
	}
}

// A redelivered event (the relay republished it, or the fan-out's ack was
// lost) creates no second delivery.
func TestRedeliveredEventIsNotDeliveredTwice(t *testing.T) {
	h := newHarness(t)
	acme := h.company("acme")
	h.endpoint(acme, "a")
	s, stop := h.start(testConfig(), true)
	ids := h.emit(acme, events.MessageSent, 10)
	eventually(t, 10*time.Second, "delivered", func() bool { return h.recv.Stats("a").Unique == 10 })
	// The relay deletes an outbox row after the stream's ack, which may come
	// after the receiver already has the event.
	eventually(t, 10*time.Second, "outbox relayed", func() bool { return h.count(`SELECT count(*) FROM event_outbox`) == 0 })
	stop()
	_ = s
	// The same events again in the outbox: the stream drops them as
	// duplicates (Nats-Msg-Id), and the deliveries exist already.
	evs := make([]events.Event, len(ids))
	for i, id := range ids {
		evs[i] = events.Event{ID: id, CompanyID: acme, Type: events.MessageSent, At: time.Now(), Data: events.Message{Phone: "+393331234567"}}
	}
	if err := events.Append(h.ctx, h.pool, evs...); err != nil {
		t.Fatal(err)
	}
	h.start(testConfig(), true)
	eventually(t, 10*time.Second, "outbox relayed", func() bool { return h.count(`SELECT count(*) FROM event_outbox`) == 0 })
	time.Sleep(300 * time.Millisecond)
	if st := h.recv.Stats("a"); st.Accepted != 10 {
		t.Fatalf("accepted %d, want 10", st.Accepted)
	}
}

func TestMarshalBodyMatchesWebhooks(t *testing.T) {
	at := time.Date(2026, 11, 26, 12, 0, 0, 123456789, time.FixedZone("x", 3600))
	e := StreamEvent{Type: "message.sent", OccurredAt: at, Data: []byte(`{"batch_id":"b","phone":"+3933"}`)}
	want, err := webhooks.MarshalBody(e.Type, e.OccurredAt, e.Data)
	if err != nil {
		t.Fatal(err)
	}
	if got := marshalBody(e); string(got) != string(want) {
		t.Fatalf("body %s\nwant %s", got, want)
	}
}
