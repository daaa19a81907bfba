package delivery

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
	"github.com/parleyhq/parley/pkg/contacts"
	"github.com/parleyhq/parley/pkg/record"
)

// outboxEvent is one event_outbox row, its data decoded.
type outboxEvent struct {
	Type    string
	Company int64
	At      time.Time
	Data    map[string]any
}

func (f *fixture) outbox() []outboxEvent {
	f.t.Helper()
	rows, err := f.pool.Query(f.ctx, `SELECT type, company_id, occurred_at, data FROM event_outbox ORDER BY seq`)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var out []outboxEvent
	for rows.Next() {
		var e outboxEvent
		var raw []byte
		if err := rows.Scan(&e.Type, &e.Company, &e.At, &raw); err != nil {
			f.t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &e.Data); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		f.t.Fatal(err)
	}
	return out
}

// eventsByPhone groups message events by phone, in outbox order.
func eventsByPhone(evs []outboxEvent) map[string][]string {
	out := map[string][]string{}
	for _, e := range evs {
		if p, ok := e.Data["phone"].(string); ok {
			out[p] = append(out[p], e.Type)
		}
	}
	return out
}

func TestEveryStateChangeWritesItsEvent(t *testing.T) {
	h := newHarness(t)
	h.clock.Run()
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ups, err := whatsapp.ParseStatusWebhook(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if _, err := record.ApplyStatuses(r.Context(), h.pool, ups, h.clock.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	}))
	defer rcv.Close()
	if err := h.sim.SetCallbacks(whatsappsim.CallbackSettings{URL: rcv.URL, AppSecret: "s"}); err != nil {
		t.Fatal(err)
	}
	h.start(record.LaneCampaign, testConfig())
	ph := phones(3)
	if _, err := contacts.NewStore(h.pool, h.clock.Now).SetOptedOut(h.ctx, h.company.ID, ph[0], true); err != nil {
		t.Fatal(err)
	}
	b := h.campaignBatch(ph, false, nil)
	h.publish(b, "")
	h.waitBatch(b.BatchId, record.BatchCompleted, 10*time.Second)
	eventually(t, 15*time.Second, "every sent message read", func() bool {
		return h.batch(b.BatchId).Counts[record.StateRead] == 2
	})
	evs := h.outbox()
	byPhone := eventsByPhone(evs)
	if got := byPhone[ph[0]]; len(got) != 1 || got[0] != "message.skipped" {
		t.Fatalf("opted-out contact's events = %v", got)
	}
	for _, p := range ph[1:] {
		got := byPhone[p]
		// The simulator calls back delivered then read; a read that
		// arrives with its delivered in one callback writes both events.
		if !slices.Equal(got, []string{"message.sent", "message.delivered", "message.read"}) {
			t.Fatalf("events of %s = %v", p, got)
		}
	}
	completed := 0
	for _, e := range evs {
		if e.Company != h.company.ID {
			t.Fatalf("event of company %d, want %d", e.Company, h.company.ID)
		}
		if e.Data["batch_id"] != b.BatchId {
			t.Fatalf("event %+v lacks its batch id", e)
		}
		if e.Data["changed_at"] == nil || e.At.IsZero() {
			t.Fatalf("event %+v lacks its time", e)
		}
		switch e.Type {
		case "message.sent":
			if e.Data["state"] != "sent" || e.Data["provider_message_id"] == "" || e.Data["message_id"] == nil {
				t.Fatalf("sent event = %+v", e)
			}
		case "batch.completed":
			completed++
			counts, _ := e.Data["counts"].(map[string]any)
			if e.Data["status"] != "completed" || e.Data["kind"] != "campaign" || counts["skipped_opt_out"] != float64(1) {
				t.Fatalf("batch event = %+v", e)
			}
		}
	}
	if completed != 1 {
		t.Fatalf("%d batch.completed events, want 1", completed)
	}
}

func TestFailuresWriteTheirEvents(t *testing.T) {
	h := newHarness(t)
	h.clock.Run()
	x := NewExpander(h.pool, h.cat, h.clock.Now)
	gone := h.campaignBatch(phones(2), false, nil)
	gone.CampaignId = h.camp.ID + 1000
	if _, err := x.Campaign(h.ctx, gone); err != nil {
		t.Fatal(err)
	}
	evs := h.outbox()
	if len(evs) != 3 || evs[0].Type != "message.failed" || evs[1].Type != "message.failed" || evs[2].Type != "batch.failed" {
		t.Fatalf("events = %+v", evs)
	}
	if e, _ := evs[0].Data["error"].(map[string]any); e["title"] == "" || evs[0].Data["state"] != "failed" {
		t.Fatalf("failed event = %+v", evs[0])
	}
	if evs[2].Data["error"] == "" || evs[2].Data["status"] != "failed" {
		t.Fatalf("batch event = %+v", evs[2])
	}
	h.exec(`DELETE FROM event_outbox`)

	// A permanent provider error: message.failed with the provider's code.
	h.start(record.LaneCampaign, testConfig())
	// Once any template is registered the simulator refuses the others (132001).
	if err := h.sim.SetTemplate(whatsappsim.TemplateSpec{Name: "something_else", Language: "en_US"}); err != nil {
		t.Fatal(err)
	}
	b := h.campaignBatch(phones(1), false, nil)
	h.publish(b, "")
	h.waitBatch(b.BatchId, record.BatchCompleted, 10*time.Second)
	evs = h.outbox()
	if len(evs) != 2 || evs[0].Type != "message.failed" || evs[1].Type != "batch.completed" {
		t.Fatalf("events = %+v", evs)
	}
	if e, _ := evs[0].Data["error"].(map[string]any); e["code"] != float64(132001) || e["title"] == "" {
		t.Fatalf("failed event = %+v", evs[0])
	}
}
