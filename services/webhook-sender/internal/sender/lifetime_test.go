package sender

import (
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/events"
	"github.com/parleyhq/parley/pkg/store"
	"github.com/parleyhq/parley/pkg/webhooks"
	"github.com/parleyhq/parley/pkg/webhooks/webhooksim"
)

// TestRetentionDropsOnlyFinishedWeeksWhileSending: the sender creates the
// current week and the two after it when it starts. The deliveries'
// retention (webhooks.KeepDeliveries, PARLEY_WEBHOOKS_ATTEMPT_RETENTION of
// 720h) then runs while the sender delivers this week's events. Of two
// weeks past it, the one whose deliveries are done (succeeded, or failed
// for good) is dropped with its attempts; the one whose deliveries are
// still pending (their endpoint answers 500) is kept, attempts and all,
// and its deliveries go out when the endpoint recovers; then the next run
// drops it. This week's events, sent all along, are each received once
// and stay recorded in this week's partition.
func TestRetentionDropsOnlyFinishedWeeksWhileSending(t *testing.T) {
	h := newHarness(t)
	now := time.Now()
	// Tables partitioned for months: no legacy partition, and no weeks from
	// this one on until the sender makes them.
	for _, table := range []string{"webhook_deliveries", "webhook_attempts"} {
		parts, err := store.Partitions(h.ctx, h.pool, table)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			if !p.End.IsZero() {
				if _, err := h.pool.Exec(h.ctx, `DROP TABLE `+p.Name); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	old, beta, acme := h.company("old"), h.company("beta"), h.company("acme")
	h.endpoint(old, "done")
	// Unknown to the receiver: 404, failed at once.
	if _, _, err := h.store.Create(h.ctx, old, webhooks.Input{URL: h.url + "/hooks/gone"}); err != nil {
		t.Fatal(err)
	}
	h.endpoint(beta, "down")
	h.recv.SetMode("down", webhooksim.Mode500, 0)
	h.endpoint(acme, "live")

	h.start(testConfig(), true)
	var ahead []string
	for w := range 3 {
		week := store.Week(now).AddDate(0, 0, 7*w).Format("20060102")
		ahead = append(ahead, "webhook_deliveries_w"+week, "webhook_attempts_w"+week)
	}
	eventually(t, 10*time.Second, "the weeks ahead created at start", func() bool {
		return h.count(`SELECT count(*) FROM pg_class WHERE relname = ANY($1)`, ahead) == len(ahead)
	})

	// Weeks past the retention, each a partition of its own.
	for _, table := range []string{"webhook_deliveries", "webhook_attempts"} {
		if _, err := store.CreateWeeks(h.ctx, h.pool, table, now.Add(-60*24*time.Hour), 5); err != nil {
			t.Fatal(err)
		}
	}
	doneAt, pendingAt := now.Add(-60*24*time.Hour), now.Add(-45*24*time.Hour)
	suffix := func(at time.Time) string { return "_w" + store.Week(at).Format("20060102") }
	doneWeek, pendingWeek := "webhook_deliveries"+suffix(doneAt), "webhook_deliveries"+suffix(pendingAt)
	h.emitAt(old, events.MessageSent, 20, doneAt)
	h.emitAt(beta, events.MessageSent, 5, pendingAt)
	eventually(t, 15*time.Second, "the old weeks' deliveries done, or retried", func() bool {
		return h.count(`SELECT count(*) FROM webhook_deliveries WHERE company_id = $1 AND status <> 'pending'`, old) == 40 &&
			h.count(`SELECT count(DISTINCT a.delivery_id) FROM webhook_attempts a JOIN webhook_endpoints e ON e.id = a.endpoint_id
				WHERE e.company_id = $1`, beta) == 5
	})
	if n := h.count(`SELECT count(*) FROM webhook_deliveries WHERE tableoid = $1::regclass`, doneWeek); n != 40 {
		t.Fatalf("%d deliveries in %s, want the 40 of 60 days ago", n, doneWeek)
	}
	if n := h.count(`SELECT count(*) FROM webhook_deliveries WHERE tableoid = $1::regclass AND status = 'pending'`, pendingWeek); n != 5 {
		t.Fatalf("%d pending deliveries in %s, want the 5 of 45 days ago", n, pendingWeek)
	}

	// This week's events, appended while the retention runs.
	var mu sync.Mutex
	var live []string
	stop, stopped := make(chan struct{}), make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				stopped <- nil
				return
			case <-time.After(20 * time.Millisecond):
			}
			at := time.Now()
			evs := make([]events.Event, 10)
			for i := range evs {
				evs[i] = events.Event{ID: idAt(at), CompanyID: acme, Type: events.MessageDelivered, At: at,
					Data: events.Message{Phone: "+393331234567", State: "delivered", ChangedAt: at}}
			}
			if err := events.Append(h.ctx, h.pool, evs...); err != nil {
				stopped <- err
				return
			}
			mu.Lock()
			for _, e := range evs {
				live = append(live, e.ID)
			}
			mu.Unlock()
		}
	}()
	eventually(t, 10*time.Second, "this week's events flowing", func() bool { return h.recv.Stats("live").Unique >= 50 })

	// keep runs the retention as the sender does; a table too busy to lock
	// at once is tried again, as the sender's next run would.
	keep := func() store.Kept {
		t.Helper()
		var all store.Kept
		for try := 0; ; try++ {
			k, err := h.store.KeepDeliveries(h.ctx, time.Now())
			all.Dropped, all.Open = append(all.Dropped, k.Dropped...), k.Open
			if errors.Is(err, store.ErrPartitionBusy) && try < 5 {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			return all
		}
	}
	k := keep()
	if !slices.Contains(k.Dropped, doneWeek) || slices.Contains(k.Dropped, pendingWeek) || !slices.Equal(k.Open, []string{pendingWeek}) {
		t.Fatalf("dropped %v, kept open %v; want %s dropped and %s kept open", k.Dropped, k.Open, doneWeek, pendingWeek)
	}
	for _, p := range k.Dropped {
		if slices.Contains(ahead, p) {
			t.Fatalf("dropped %s, a week not past the retention", p)
		}
	}
	if n := h.count(`SELECT count(*) FROM webhook_deliveries WHERE company_id = $1`, old); n != 0 {
		t.Fatalf("%d deliveries of the done week left", n)
	}
	if n := h.count(`SELECT count(*) FROM webhook_attempts a JOIN webhook_endpoints e ON e.id = a.endpoint_id WHERE e.company_id = $1`, old); n != 0 {
		t.Fatalf("%d attempts of the done week left", n)
	}
	if n := h.count(`SELECT count(*) FROM pg_class WHERE relname = $1`, "webhook_attempts"+suffix(doneAt)); n != 0 {
		t.Fatal("the done week's attempts partition is left")
	}
	if n := h.count(`SELECT count(*) FROM webhook_deliveries WHERE company_id = $1 AND status = 'pending'`, beta); n != 5 {
		t.Fatalf("%d pending deliveries of the kept week, want 5", n)
	}
	if n := h.count(`SELECT count(*) FROM webhook_attempts WHERE tableoid = $1::regclass`, "webhook_attempts"+suffix(pendingAt)); n < 5 {
		t.Fatalf("%d attempts in the kept week, want its attempts kept (at least 5)", n)
	}

	// The endpoint recovers: its deliveries go out, then their week.
	h.recv.SetMode("down", webhooksim.ModeOK, 0)
	eventually(t, 15*time.Second, "the kept week's deliveries sent", func() bool {
		return h.recv.Stats("down").Unique == 5 &&
			h.count(`SELECT count(*) FROM webhook_deliveries WHERE company_id = $1 AND status = 'succeeded'`, beta) == 5
	})
	k = keep()
	if !slices.Contains(k.Dropped, pendingWeek) || len(k.Open) != 0 {
		t.Fatalf("once sent: dropped %v, kept open %v; want %s dropped", k.Dropped, k.Open, pendingWeek)
	}
	if n := h.count(`SELECT (SELECT count(*) FROM webhook_deliveries WHERE company_id = $1) +
		(SELECT count(*) FROM webhook_attempts a JOIN webhook_endpoints e ON e.id = a.endpoint_id WHERE e.company_id = $1)`, beta); n != 0 {
		t.Fatalf("%d deliveries and attempts of the dropped week left", n)
	}

	close(stop)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	ids := slices.Clone(live)
	mu.Unlock()
	eventually(t, 20*time.Second, "this week's events received and recorded", func() bool {
		return h.recv.Stats("live").Unique == len(ids) &&
			h.count(`SELECT count(*) FROM webhook_deliveries WHERE company_id = $1 AND status = 'succeeded'`, acme) == len(ids)
	})
	counts := h.recv.Counts("live")
	for _, id := range ids {
		if counts[id] != 1 {
			t.Fatalf("event %s of this week received %d times, want 1", id, counts[id])
		}
	}
	if n := h.count(`SELECT count(*) FROM webhook_deliveries WHERE company_id = $1 AND event_id = ANY($2::uuid[])
		AND tableoid::regclass::text = ANY($3)`, acme, ids, ahead); n != len(ids) {
		t.Fatalf("%d of this week's %d deliveries in this week's partitions", n, len(ids))
	}
	if n := h.count(`SELECT count(DISTINCT a.delivery_id) FROM webhook_attempts a JOIN webhook_deliveries d
		ON d.id = a.delivery_id AND d.created_at = a.delivery_created_at WHERE d.company_id = $1`, acme); n != len(ids) {
		t.Fatalf("%d of this week's %d deliveries have their attempts recorded", n, len(ids))
	}
}

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
