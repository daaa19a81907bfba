package delivery

import (
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
	"github.com/parleyhq/parley/pkg/contacts"
	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/record"
)

func TestCampaignOptOutAndForced(t *testing.T) {
	h := newHarness(t)
	h.clock.Run()
	h.start(record.LaneCampaign, testConfig())
	ph := phones(3)
	out, in := ph[0], ph[1]
	if _, err := contacts.NewStore(h.pool, h.clock.Now).SetOptedOut(h.ctx, h.company.ID, out, true); err != nil {
		t.Fatal(err)
	}
	plain := h.campaignBatch([]string{out, in}, false, nil)
	h.publish(plain, "")
	got := h.waitBatch(plain.BatchId, record.BatchCompleted, 10*time.Second)
	if got.Counts[record.StateSkippedOptOut] != 1 || got.Counts[record.StateSent] != 1 || got.CompletedAt == nil {
		t.Fatalf("batch = %+v", got)
	}
	msgs := h.messages(plain.BatchId)
	if msgs[0].State != record.StateSkippedOptOut || msgs[0].Attempts != 0 || msgs[1].State != record.StateSent || msgs[1].WAMID == nil {
		t.Fatalf("messages = %+v", msgs)
	}
	if h.sends(out) != 0 || h.sends(in) != 1 {
		t.Fatalf("provider got %d to the opted-out contact, %d to the other", h.sends(out), h.sends(in))
	}

	forced := h.campaignBatch([]string{out}, true, nil)
	h.publish(forced, "")
	got = h.waitBatch(forced.BatchId, record.BatchCompleted, 10*time.Second)
	if got.Counts[record.StateSent] != 1 || h.sends(out) != 1 {
		t.Fatalf("forced batch = %+v, sends %d", got, h.sends(out))
	}

	// The account's throughput key carries its company's hash tag, so that
	// in a Redis Cluster it sits beside the company's request limits.
	want := ratelimit.CompanyKey(h.company.ID, "account:"+strconv.FormatInt(h.acct.ID, 10))
	h.throttleKeys.Range(func(k, _ any) bool {
		if k != want {
			t.Errorf("throughput key %q, want %q", k, want)
		}
		return true
	})
	if _, ok := h.throttleKeys.Load(want); !ok {
		t.Errorf("the limiter was never asked for %q", want)
	}
}

func TestScheduledSendWaitsForTheClock(t *testing.T) {
	h := newHarness(t)
	h.clock.Run()
	cfg := testConfig()
	h.start(record.LaneCampaign, cfg)
	at := h.clock.Now().Add(3 * time.Hour)
	ph := phones(20)
	b := h.campaignBatch(ph, false, &at)
	h.publish(b, "")
	h.waitBatch(b.BatchId, record.BatchScheduled, 10*time.Second)
	// Several polls go by: nothing is due yet.
	time.Sleep(6 * cfg.PollInterval)
	for _, m := range h.messages(b.BatchId) {
		if m.State != record.StateScheduled {
			t.Fatalf("before scheduled_at: %+v", m)
		}
	}
	if n := h.sim.Stats().Accepted; n != 0 {
		t.Fatalf("provider got %d sends before scheduled_at", n)
	}
	// A contact that opts out while the batch waits is skipped.
	if _, err := contacts.NewStore(h.pool, h.clock.Now).SetOptedOut(h.ctx, h.company.ID, ph[0], true); err != nil {
		t.Fatal(err)
	}
	h.clock.Set(at.Add(-time.Second))
	time.Sleep(4 * cfg.PollInterval)
	if n := h.sim.Stats().Accepted; n != 0 {
		t.Fatalf("provider got %d sends a second before scheduled_at", n)
	}
	h.clock.Set(at)
	got := h.waitBatch(b.BatchId, record.BatchCompleted, 10*time.Second)
	if got.Counts[record.StateSent] != 19 || got.Counts[record.StateSkippedOptOut] != 1 {
		t.Fatalf("batch = %+v", got)
	}
	for _, p := range ph[1:] {
		if h.sends(p) != 1 {
			t.Fatalf("%s got %d sends", p, h.sends(p))
		}
	}
}

func TestDeliveryHoursDeferUntilOpening(t *testing.T) {
	h := newHarness(t)
	rome, err := time.LoadLocation("Europe/Rome")
	if err != nil {
		t.Fatal(err)
	}
	acct := h.newAccount(h.company.ID, &catalog.DeliveryWindow{Start: 9 * time.Hour, End: 18 * time.Hour}, "Europe/Rome", 80)
	h.serve(acct.PhoneNumberID)
	camp, err := h.cat.CreateCampaign(h.ctx, h.company.ID, "Evening", h.tpl.ID, acct.ID)
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Set(time.Date(2025, 6, 2, 20, 0, 0, 0, rome))
	h.clock.Run()
	cfg := testConfig()
	h.start(record.LaneCampaign, cfg)

	ph := phones(3)
	plain := h.campaignBatch(ph[:2], false, nil)
	plain.CampaignId = camp.ID
	forced := h.campaignBatch(ph[2:], true, nil)
	forced.CampaignId = camp.ID
	h.publish(plain, "")
	h.publish(forced, "")
	h.waitBatch(forced.BatchId, record.BatchCompleted, 10*time.Second)
	opening := time.Date(2025, 6, 3, 9, 0, 0, 0, rome)
	eventually(t, 10*time.Second, "messages deferred", func() bool {
		for _, m := range h.messages(plain.BatchId) {
			if m.State != record.StateDeferred || !m.NotBefore.Equal(opening) {
				return false
			}
		}
		return true
	})
	time.Sleep(4 * cfg.PollInterval)
	if h.sends(ph[0]) != 0 || h.sends(ph[1]) != 0 || h.sends(ph[2]) != 1 {
		t.Fatalf("outside hours: sends %d %d %d", h.sends(ph[0]), h.sends(ph[1]), h.sends(ph[2]))
	}
	if got := h.batch(plain.BatchId); got.Status != record.BatchProcessing || got.Counts[record.StateDeferred] != 2 {
		t.Fatalf("deferred batch = %+v", got)
	}
	h.clock.Set(opening.Add(-time.Second))
	time.Sleep(4 * cfg.PollInterval)
	if h.sends(ph[0]) != 0 {
		t.Fatal("sent a second before the opening")
	}
	h.clock.Set(opening)
	h.waitBatch(plain.BatchId, record.BatchCompleted, 10*time.Second)
	if h.sends(ph[0]) != 1 || h.sends(ph[1]) != 1 {
		t.Fatalf("after opening: sends %d %d", h.sends(ph[0]), h.sends(ph[1]))
	}
}

func TestRedeliveryNeverSendsTwice(t *testing.T) {
	h := newHarness(t)
	h.clock.Run()
	d := h.start(record.LaneCampaign, testConfig())
	ph := phones(50)
	b := h.campaignBatch(ph, false, nil)
	h.publish(b, "")
	h.waitBatch(b.BatchId, record.BatchCompleted, 10*time.Second)
	// The same batch again, past the stream's de-duplication, and again to a
	// fresh dispatcher (a redelivery after a crash).
	h.publish(b, b.BatchId+"-again")
	d.stop()
	h.start(record.LaneCampaign, testConfig())
	h.publish(b, b.BatchId+"-third")
	eventually(t, 10*time.Second, "redeliveries acked", func() bool {
		info, err := h.js.Consumer(h.ctx, h.busCfg.Stream, ConsumerName(record.LaneCampaign))
		if err != nil {
			t.Fatal(err)
		}
		ci, err := info.Info(h.ctx)
		return err == nil && ci.NumPending == 0 && ci.NumAckPending == 0
	})
	time.Sleep(300 * time.Millisecond)
	if n := len(h.messages(b.BatchId)); n != 50 {
		t.Fatalf("%d messages after redelivery", n)
	}
	st := h.sim.Stats()
	if st.Accepted != 50 || st.DuplicateRecipients != 0 {
		t.Fatalf("provider accepted %d, duplicates %d", st.Accepted, st.DuplicateRecipients)
	}
}

func TestAutomationPersonalisesAndOverrides(t *testing.T) {
	h := newHarness(t)
	h.clock.Run()
	tpl := h.newTemplate(h.company.ID, whatsapp.Template{
		Name: "shipped", Language: "en_US", HeaderKind: whatsapp.HeaderImage, HeaderMediaURL: "https://cdn.example/default.png",
		BodyParameters: []whatsapp.Binding{{Source: "first_name"}, {Source: "variable", Name: "order"}, {Source: "variable", Name: "tier", Default: "none"}},
		URLButtons:     []whatsapp.URLButton{{Base: "https://shop.example/o/", DefaultSuffix: "home"}, {Base: "https://shop.example/t/", DefaultSuffix: "track"}},
	})
	auto, err := h.cat.CreateAutomation(h.ctx, catalog.NewAutomation{CompanyID: h.company.ID, Name: "Shipped", Active: true,
		TemplateID: &tpl.ID, MessagingAccountID: &h.acct.ID, TriggerVariables: []string{"order"}})
	if err != nil {
		t.Fatal(err)
	}
	ph := phones(2)
	cs := contacts.NewStore(h.pool, h.clock.Now)
	if _, err := cs.Upsert(h.ctx, h.company.ID, []contacts.Upsert{{Phone: ph[0], FirstName: ptr("Ada"),
		Variables: map[string]string{"order": "old", "tier": "gold"}}}); err != nil {
		t.Fatal(err)
	}
	// An opted-out contact still gets automation messages.
	if _, err := cs.SetOptedOut(h.ctx, h.company.ID, ph[0], true); err != nil {
		t.Fatal(err)
	}
	h.start(record.LaneAutomation, testConfig())
	b := &sendsv1.AutomationBatch{
		BatchId: newBatchID(t), CompanyId: h.company.ID, AutomationId: auto.ID,
		ImageUrl: "https://cdn.example/request.png", Url: "https://shop.example/o/A-42",
		Contacts: []*sendsv1.AutomationContact{
			{Phone: ph[0], Variables: map[string]string{"order": "A-42"}},
			{Phone: ph[1][1:], FirstName: ptr("Bob"), ImageUrl: "https://cdn.example/bob.png", Variables: map[string]string{"order": "B-7"}},
		},
	}
	h.publish(b, "")
	got := h.waitBatch(b.BatchId, record.BatchCompleted, 10*time.Second)
	if got.Counts[record.StateSent] != 2 {
		t.Fatalf("batch = %+v", got)
	}
	c0, err := cs.ByPhone(h.ctx, h.company.ID, ph[0])
	if err != nil || c0.Variables["order"] != "A-42" || c0.Variables["tier"] != "gold" || c0.FirstName != "Ada" {
		t.Fatalf("existing contact = %+v, %v", c0, err)
	}
	if c1, err := cs.ByPhone(h.ctx, h.company.ID, ph[1]); err != nil || c1.FirstName != "Bob" {
		t.Fatalf("new contact = %+v, %v", c1, err)
	}
	for i, want := range []struct {
		image, body, url, url2 string
	}{
		{"https://cdn.example/request.png", "Ada|A-42|gold", "A-42", "track"},
		{"https://cdn.example/bob.png", "Bob|B-7|none", "A-42", "track"},
	} {
		rcv := h.received(ph[i])
		if len(rcv) != 1 {
			t.Fatalf("contact %d: %d sends", i, len(rcv))
		}
		var image, url, url2 string
		var body []string
		for _, c := range rcv[0].Components {
			switch {
			case c.Type == "header" && len(c.Parameters) == 1 && c.Parameters[0].Image != nil:
				image = c.Parameters[0].Image.Link
			case c.Type == "body":
				for _, p := range c.Parameters {
					body = append(body, p.Text)
				}
			case c.Type == "button" && c.Index == "0":
				url = c.Parameters[0].Text
			case c.Type == "button" && c.Index == "1":
				url2 = c.Parameters[0].Text
			}
		}
		if image != want.image || strings.Join(body, "|") != want.body || url != want.url || url2 != want.url2 {
			t.Fatalf("contact %d payload: image %q body %q url %q url2 %q; want %+v", i, image, body, url, url2, want)
		}
	}
}

func TestRetryableErrorsThenFailed(t *testing.T) {
	h := newHarness(t)
	h.clock.Run()
	if err := h.sim.SetFaults(whatsappsim.Faults{ErrorRate: 1}); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.MaxAttempts, cfg.BackoffBase, cfg.BackoffCap = 3, 50*time.Millisecond, 200*time.Millisecond
	d := h.start(record.LaneCampaign, cfg)
	ph := phones(1)
	b := h.campaignBatch(ph, false, nil)
	h.publish(b, "")
	got := h.waitBatch(b.BatchId, record.BatchCompleted, 15*time.Second)
	m := h.messages(b.BatchId)[0]
	if got.Counts[record.StateFailed] != 1 || m.State != record.StateFailed || m.Attempts != 3 || m.Code == nil || (*m.Code != 131000 && *m.Code != 131016) {
		t.Fatalf("message = %+v (code %v)", m, m.Code)
	}
	if st := h.sim.Stats(); st.Requests != 3 || st.Accepted != 0 {
		t.Fatalf("provider saw %d requests, accepted %d; want 3 attempts", st.Requests, st.Accepted)
	}

	// A transient failure that clears is retried into a send.
	if err := h.sim.SetFaults(whatsappsim.Faults{ErrorRate: 0.5}); err != nil {
		t.Fatal(err)
	}
	d.stop()
	cfg.MaxAttempts = 20
	h.start(record.LaneCampaign, cfg)
	ph = phones(30)
	b = h.campaignBatch(ph, false, nil)
	h.publish(b, "")
	got = h.waitBatch(b.BatchId, record.BatchCompleted, 20*time.Second)
	if got.Counts[record.StateSent] != 30 {
		t.Fatalf("with half the calls failing: %+v", got.Counts)
	}
}

func TestPermanentErrorFailsWithProviderCode(t *testing.T) {
	h := newHarness(t)
	h.clock.Run()
	// Once any template is registered the simulator refuses the others (132001).
	if err := h.sim.SetTemplate(whatsappsim.TemplateSpec{Name: "something_else", Language: "en_US"}); err != nil {
		t.Fatal(err)
	}
	h.start(record.LaneCampaign, testConfig())
	b := h.campaignBatch(phones(2), false, nil)
	h.publish(b, "")
	got := h.waitBatch(b.BatchId, record.BatchCompleted, 10*time.Second)
	for _, m := range h.messages(b.BatchId) {
		if m.State != record.StateFailed || m.Attempts != 1 || m.Code == nil || *m.Code != 132001 || m.Title == nil || *m.Title == "" {
			t.Fatalf("message = %+v", m)
		}
	}
	if got.Counts[record.StateFailed] != 2 || h.sim.Stats().Requests != 2 {
		t.Fatalf("batch = %+v, requests %d", got, h.sim.Stats().Requests)
	}
}

// TestStatusCallbacksReachTheirMessages runs the simulator's status
// webhooks (sent, delivered, read right after each send) into
// ApplyStatuses, as the gateway does: some arrive before the dispatcher
// has recorded the wamid, and every message still ends read.
func TestStatusCallbacksReachTheirMessages(t *testing.T) {
	h := newHarness(t)
	h.clock.Run()
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		ups, err := whatsapp.ParseStatusWebhook(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if _, err := record.ApplyStatuses(r.Context(), h.pool, ups, h.clock.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}))
	defer rcv.Close()
	if err := h.sim.SetCallbacks(whatsappsim.CallbackSettings{URL: rcv.URL, AppSecret: "s"}); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.FlushInterval = 50 * time.Millisecond // widen the race the backlog covers
	h.start(record.LaneCampaign, cfg)
	b := h.campaignBatch(phones(200), false, nil)
	h.publish(b, "")
	h.waitBatch(b.BatchId, record.BatchCompleted, 10*time.Second)
	eventually(t, 15*time.Second, "every message read", func() bool {
		return h.batch(b.BatchId).Counts[record.StateRead] == 200
	})
	// Callbacks that raced the recorder's own pass over the backlog are
	// applied by the sweeper (every second here).
	eventually(t, 5*time.Second, "status backlog drained", func() bool {
		var early int
		return h.pool.QueryRow(h.ctx, `SELECT count(*) FROM provider_status_backlog`).Scan(&early) == nil && early == 0
	})
	var delivered int
	if err := h.pool.QueryRow(h.ctx, `SELECT count(*) FROM messages WHERE batch_id = $1 AND delivered_at IS NOT NULL AND read_at IS NOT NULL`, b.BatchId).Scan(&delivered); err != nil || delivered != 200 {
		t.Fatalf("timestamps: %d, %v", delivered, err)
	}
}

func TestTwoDispatchersNeverSendTwice(t *testing.T) {
	h := newHarness(t)
	h.clock.Run()
	cfg := testConfig()
	a := h.start(record.LaneCampaign, cfg)
	b := h.start(record.LaneCampaign, cfg)
	var ids []string
	total := 0
	for range 8 {
		bt := h.campaignBatch(phones(250), false, nil)
		h.publish(bt, "")
		ids = append(ids, bt.BatchId)
		total += 250
	}
	for _, id := range ids {
		h.waitBatch(id, record.BatchCompleted, 30*time.Second)
	}
	st := h.sim.Stats()
	if st.Accepted != int64(total) || st.DuplicateRecipients != 0 {
		t.Fatalf("provider accepted %d of %d, %d recipients twice", st.Accepted, total, st.DuplicateRecipients)
	}
	// Both took part (SKIP LOCKED shares the queue rather than serialising it).
	if a.sentCount() == 0 || b.sentCount() == 0 || a.sentCount()+b.sentCount() != float64(total) {
		t.Fatalf("sent by a %v, by b %v", a.sentCount(), b.sentCount())
	}

	// A scheduled batch is released exactly once by two instances.
	at := h.clock.Now().Add(time.Hour)
	ph := phones(300)
	sched := h.campaignBatch(ph, false, &at)
	h.publish(sched, "")
	h.waitBatch(sched.BatchId, record.BatchScheduled, 10*time.Second)
	h.clock.Set(at)
	h.waitBatch(sched.BatchId, record.BatchCompleted, 20*time.Second)
	for _, p := range ph {
		if n := h.sends(p); n != 1 {
			t.Fatalf("%s got %d sends", p, n)
		}
	}
}

func TestStaleClaimIsSentAgainAfterTheLease(t *testing.T) {
	h := newHarness(t)
	x := NewExpander(h.pool, h.cat, h.clock.Now)
	b := h.campaignBatch(phones(2), false, nil)
	if _, err := x.Campaign(h.ctx, b); err != nil {
		t.Fatal(err)
	}
	// A dispatcher that claimed and died: its rows stay in sending.
	dead := newTestEngine(t, h.fixture, record.LaneCampaign)
	if got, err := dead.claim(h.ctx, h.acct.ID, 10, h.clock.Now(), false); err != nil || len(got) != 2 {
		t.Fatalf("claim = %d, %v", len(got), err)
	}
	cfg := testConfig()
	cfg.SweepInterval = 100 * time.Millisecond
	h.clock.Run()
	h.start(record.LaneCampaign, cfg)
	time.Sleep(500 * time.Millisecond)
	if n := h.sim.Stats().Accepted; n != 0 {
		t.Fatalf("sent %d claims held by another dispatcher within the lease", n)
	}
	h.clock.Advance(cfg.Lease + time.Second)
	got := h.waitBatch(b.BatchId, record.BatchCompleted, 10*time.Second)
	for _, m := range h.messages(b.BatchId) {
		if m.State != record.StateSent || m.Attempts != 2 {
			t.Fatalf("message = %+v (the lost claim counts as an attempt)", m)
		}
	}
	if got.Counts[record.StateSent] != 2 || h.sim.Stats().Accepted != 2 {
		t.Fatalf("batch = %+v", got)
	}
}

func TestUndecodableBatchIsRejected(t *testing.T) {
	h := newHarness(t)
	h.clock.Run()
	h.start(record.LaneCampaign, testConfig())
	if _, err := h.js.Publish(h.ctx, h.busCfg.CampaignSubject(h.company.ID), []byte("\xff\xff not protobuf"),
		jetstream.WithMsgID("junk-1")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "rejected batch kept", func() bool {
		var n int
		err := h.pool.QueryRow(h.ctx, `SELECT count(*) FROM rejected_bus_messages WHERE msg_id = 'junk-1'`).Scan(&n)
		return err == nil && n == 1
	})
	// Terminated, not redelivered: the work queue is empty.
	h.waitStreamEmpty(5 * time.Second)
}

func TestAccountThroughputIsRespected(t *testing.T) {
	h := newHarness(t)
	h.clock.Run()
	acct := h.newAccount(h.company.ID, nil, "UTC", 40)
	h.serve(acct.PhoneNumberID)
	camp, err := h.cat.CreateCampaign(h.ctx, h.company.ID, "Slow", h.tpl.ID, acct.ID)
	if err != nil {
		t.Fatal(err)
	}
	h.start(record.LaneCampaign, testConfig())
	b := h.campaignBatch(phones(100), false, nil)
	b.CampaignId = camp.ID
	start := time.Now()
	h.publish(b, "")
	h.waitBatch(b.BatchId, record.BatchCompleted, 20*time.Second)
	// 100 messages at 40/s with a burst of 4 take at least 2.4 s.
	if el := time.Since(start); el < 2300*time.Millisecond {
		t.Fatalf("100 messages at 40/s took %s", el)
	}
}

// TestOnTheLocalNATS29 runs a campaign and an automation batch through
// the local NATS server (2.9, as deployed), on a stream of its own: the
// consumer, Consume, DoubleAck and the work-queue filters must use nothing
// newer.
func TestOnTheLocalNATS29(t *testing.T) {
	url := os.Getenv("PARLEY_TEST_NATS_URL")
	if url == "" {
		url = "nats://127.0.0.1:4222"
	}
	h := newHarnessOn(t, url)
	h.clock.Run()
	h.start(record.LaneCampaign, testConfig())
	h.start(record.LaneAutomation, testConfig())
	c := h.campaignBatch(phones(20), false, nil)
	h.publish(c, "")
	a := &sendsv1.AutomationBatch{BatchId: newBatchID(t), CompanyId: h.company.ID, AutomationId: h.auto.ID,
		Contacts: []*sendsv1.AutomationContact{{Phone: phones(1)[0], Variables: map[string]string{"order": "1"}}}}
	h.publish(a, "")
	h.waitBatch(c.BatchId, record.BatchCompleted, 10*time.Second)
	h.waitBatch(a.BatchId, record.BatchCompleted, 10*time.Second)
	if st := h.sim.Stats(); st.Accepted != 21 {
		t.Fatalf("provider accepted %d", st.Accepted)
	}
}

// TestGracefulStopLeavesNothingClaimed stops a dispatcher while provider
// calls are in flight and while a slow account's claim waits for its
// throughput: the calls finish and are recorded, the waiting claim goes back
// to the queue without spending an attempt, and no row is left in sending.
func TestGracefulStopLeavesNothingClaimed(t *testing.T) {
	h := newHarness(t)
	h.clock.Run()
	if err := h.sim.SetFaults(whatsappsim.Faults{Latency: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	slow := h.newAccount(h.company.ID, nil, "UTC", 1)
	h.serve(slow.PhoneNumberID)
	camp, err := h.cat.CreateCampaign(h.ctx, h.company.ID, "Slow", h.tpl.ID, slow.ID)
	if err != nil {
		t.Fatal(err)
	}
	d := h.start(record.LaneCampaign, testConfig())
	fast := h.campaignBatch(phones(40), false, nil)
	h.publish(fast, "")
	slowBatch := h.campaignBatch(phones(5), false, nil)
	slowBatch.CampaignId = camp.ID
	h.publish(slowBatch, "")
	// The slow account's second claim waits for its throughput (one a
	// second) while the first call and the fast batch's are in flight.
	eventually(t, 10*time.Second, "calls in flight and a claim waiting", func() bool {
		var fastSending, slowTaken int
		err := h.pool.QueryRow(h.ctx, `SELECT count(*) FILTER (WHERE batch_id = $1 AND state = 'sending'),
			count(*) FILTER (WHERE batch_id = $2 AND state IN ('sending', 'sent')) FROM messages`,
			fast.BatchId, slowBatch.BatchId).Scan(&fastSending, &slowTaken)
		return err == nil && fastSending > 0 && slowTaken >= 2
	})
	d.stop()
	var sending, sent int
	if err := h.pool.QueryRow(h.ctx, `SELECT count(*) FILTER (WHERE state = 'sending'), count(*) FILTER (WHERE state = 'sent') FROM messages`).Scan(&sending, &sent); err != nil {
		t.Fatal(err)
	}
	if sending != 0 || int64(sent) != h.sim.Stats().Accepted {
		t.Fatalf("after a graceful stop: %d sending, %d recorded sent, provider accepted %d", sending, sent, h.sim.Stats().Accepted)
	}
	if released := testutil.ToFloat64(d.m.messages.WithLabelValues(string(record.LaneCampaign), string(record.OutcomeRelease))); released < 1 {
		t.Fatalf("no claim was waiting for throughput at the stop (released %v)", released)
	}
	for _, m := range h.messages(slowBatch.BatchId) {
		if m.State == record.StateQueued && m.Attempts != 0 {
			t.Fatalf("a released claim spent an attempt: %+v", m)
		}
	}
	// A new dispatcher finishes the work.
	h.start(record.LaneCampaign, testConfig())
	h.waitBatch(fast.BatchId, record.BatchCompleted, 10*time.Second)
	h.waitBatch(slowBatch.BatchId, record.BatchCompleted, 15*time.Second)
	if st := h.sim.Stats(); st.Accepted != 45 || st.DuplicateRecipients != 0 {
		t.Fatalf("provider accepted %d, %d twice", st.Accepted, st.DuplicateRecipients)
	}
}

// TestDispatchersMakeTheirDeclaredConsumers: the consumers each lane makes
// on the stream are exactly those Consumers declares (which deploy/k8s
// scales on), with their filters.
func TestDispatchersMakeTheirDeclaredConsumers(t *testing.T) {
	h := newHarness(t)
	if got := Consumers("sms", h.busCfg); got != nil {
		t.Fatalf("Consumers of an unknown lane = %v", got)
	}
	want := map[string]string{}
	for _, lane := range []record.Lane{record.LaneCampaign, record.LaneAutomation} {
		for _, c := range Consumers(lane, h.busCfg) {
			want[c.Name] = c.Filter
		}
		h.start(lane, testConfig())
	}
	if len(want) != 4 || want[BatchConsumerName] != h.busCfg.BatchFilter() || want[ConsumerName(record.LaneAutomation)] != h.busCfg.AutomationFilter() ||
		want[ReplyConsumerName] != h.busCfg.ReplyFilter() {
		t.Fatalf("Consumers = %v", want)
	}
	eventually(t, 10*time.Second, "the declared consumers exist", func() bool {
		stream, err := h.js.Stream(h.ctx, h.busCfg.Stream)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		infos := stream.ListConsumers(h.ctx)
		for ci := range infos.Info() {
			got[ci.Name] = ci.Config.FilterSubject
		}
		return infos.Err() == nil && maps.Equal(got, want)
	})
}
