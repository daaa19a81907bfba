package delivery

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
	"github.com/parleyhq/parley/pkg/record"
)

// simTemplate registers the fixture's template at the simulator (APPROVED)
// and returns its id there.
func (h *harness) simTemplate() string {
	h.t.Helper()
	if err := h.sim.SetTemplate(whatsappsim.TemplateSpec{Name: h.tpl.Name, Language: h.tpl.Language, BodyParameters: 2}); err != nil {
		h.t.Fatal(err)
	}
	for _, st := range h.sim.TemplateStates() {
		if st.Name == h.tpl.Name {
			return st.ID
		}
	}
	h.t.Fatal("template not registered")
	return ""
}

// waitStates waits until the batch's messages are in the wanted states.
func (h *harness) waitStates(batchID string, want map[string]int, within time.Duration) {
	h.t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := h.states(batchID)
		ok := true
		for s, n := range want {
			ok = ok && got[s] == n
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("batch %s: %v, want %v", batchID, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (h *harness) states(batchID string) map[string]int {
	h.t.Helper()
	out := map[string]int{}
	for _, m := range h.messages(batchID) {
		out[string(m.State)]++
	}
	return out
}

func (h *harness) templateStatus() string {
	h.t.Helper()
	var s string
	if err := h.pool.QueryRow(h.ctx, `SELECT status FROM templates WHERE id = $1`, h.tpl.ID).Scan(&s); err != nil {
		h.t.Fatal(err)
	}
	return s
}

// TestPausedTemplateHoldsThenGoesWhenApproved: a campaign sent while its
// template is paused at the provider is held, never failed: the first
// refusals (132015, a claim's worth) pause the template in Parley, which
// holds the rest before they are sent; when the template is approved again
// every message goes, once.
func TestPausedTemplateHoldsThenGoesWhenApproved(t *testing.T) {
	h := newHarness(t)
	h.clock.Run()
	id := h.simTemplate()
	if _, err := h.sim.PauseTemplate(id); err != nil {
		t.Fatal(err)
	}
	h.paced = true
	cfg := testConfig()
	h.start(record.LaneCampaign, cfg)
	ph := phones(600)
	b := h.campaignBatch(ph, false, nil)
	h.publish(b, "")
	h.waitStates(b.BatchId, map[string]int{"held": 600}, 20*time.Second)
	if s := h.templateStatus(); s != record.TemplatePaused {
		t.Fatalf("template %s, want PAUSED after the provider's 132015", s)
	}
	refused := h.sim.Stats().Errors["132015"]
	// A claim is a tenth of the account's 2,000/s: at most the sends of
	// the claims in flight when the first refusal came back.
	if refused == 0 || refused > 2*200 {
		t.Fatalf("%d sends refused with 132015, want between 1 and two claims (400)", refused)
	}
	held, err := record.BatchHeld(h.ctx, h.pool, b.BatchId)
	if err != nil || len(held) != 1 || held[0].Reason != record.HoldTemplatePaused || held[0].TemplateName != h.tpl.Name {
		t.Fatalf("held: %+v, %v", held, err)
	}

	if _, err := h.sim.UnpauseTemplate(id); err != nil {
		t.Fatal(err)
	}
	if _, err := record.ApplyTemplateChange(h.ctx, h.pool, record.TemplateChange{CompanyID: h.company.ID, TemplateID: h.tpl.ID,
		Status: record.TemplateApproved, Source: record.SourceWebhook}); err != nil {
		t.Fatal(err)
	}
	got := h.waitBatch(b.BatchId, record.BatchCompleted, 20*time.Second)
	if got.Counts[record.StateSent] != 600 || got.Counts[record.StateFailed] != 0 {
		t.Fatalf("after the approval: %+v", got.Counts)
	}
	for _, p := range ph {
		if n := h.sends(p); n != 1 {
			t.Fatalf("%s received %d sends, want 1", p, n)
		}
	}
}

// TestDisabledTemplateFailsItsMessages: the provider's 132016 disables the
// template in Parley, which fails every other message of it with 132016 and
// its reason, without sending them.
func TestDisabledTemplateFailsItsMessages(t *testing.T) {
	h := newHarness(t)
	h.clock.Run()
	id := h.simTemplate()
	for i := 0; i < whatsappsim.PausesToDisable; i++ {
		if _, err := h.sim.PauseTemplate(id); err != nil {
			t.Fatal(err)
		}
		if i < whatsappsim.PausesToDisable-1 {
			if _, err := h.sim.UnpauseTemplate(id); err != nil {
				t.Fatal(err)
			}
		}
	}
	h.paced = true
	h.start(record.LaneCampaign, testConfig())
	b := h.campaignBatch(phones(600), false, nil)
	h.publish(b, "")
	got := h.waitBatch(b.BatchId, record.BatchCompleted, 20*time.Second)
	if got.Counts[record.StateFailed] != 600 {
		t.Fatalf("counts %+v, want 600 failed", got.Counts)
	}
	// Every message names the template, those the provider refused as
	// well as those failed without a send.
	named := fmt.Sprintf("Template is disabled: %s (%s): refused by the provider", h.tpl.Name, h.tpl.Language)
	for _, m := range h.messages(b.BatchId) {
		if m.Code == nil || *m.Code != record.CodeTemplateDisabled || m.Title == nil || *m.Title != named {
			title := "<nil>"
			if m.Title != nil {
				title = *m.Title
			}
			t.Fatalf("message %d: code %v, title %q; want 132016 %q", m.ID, m.Code, title, named)
		}
	}
	if s := h.templateStatus(); s != record.TemplateDisabled {
		t.Fatalf("template %s, want DISABLED", s)
	}
	if r := h.sim.Stats().Requests; r > 2*200 {
		t.Fatalf("%d send attempts, want at most two claims' worth", r)
	}
}

// TestPairRateSpacesOneUserWithoutSlowingTheRest: three campaigns that all
// include one user go out at once; that user's three messages arrive the
// pair interval apart and the provider refuses none (131056), while the
// other users' messages are not held back.
func TestPairRateSpacesOneUserWithoutSlowingTheRest(t *testing.T) {
	h := newHarness(t)
	h.clock.Run()
	rules := whatsappsim.DefaultRules()
	rules.PairRateInterval = time.Second
	if err := h.sim.SetRules(rules); err != nil {
		t.Fatal(err)
	}
	h.paced = true
	cfg := testConfig()
	cfg.PairInterval = 1200 * time.Millisecond
	h.start(record.LaneCampaign, cfg)
	shared := phones(1)[0]
	var ids []string
	for i := 0; i < 3; i++ {
		b := h.campaignBatch(append(phones(50), shared), false, nil)
		h.publish(b, "")
		ids = append(ids, b.BatchId)
	}
	for _, id := range ids {
		got := h.waitBatch(id, record.BatchCompleted, 20*time.Second)
		if got.Counts[record.StateSent] != 51 {
			t.Fatalf("batch %s: %+v", id, got.Counts)
		}
	}
	if n := h.sim.Stats().Errors["131056"]; n != 0 {
		t.Fatalf("%d sends refused with 131056", n)
	}
	recv := h.received(shared)
	if len(recv) != 3 {
		t.Fatalf("%s received %d messages, want 3", shared, len(recv))
	}
	for i := 1; i < len(recv); i++ {
		if gap := recv[i].ReceivedAt.Sub(recv[i-1].ReceivedAt); gap < time.Second {
			t.Fatalf("messages %d and %d to one user %s apart, want at least 1s", i-1, i, gap)
		}
	}
	// The others went in the first round: well before the shared user's
	// last message.
	var last time.Time
	for _, id := range ids {
		for _, m := range h.messages(id) {
			if m.Phone != shared {
				r := h.received(m.Phone)
				if len(r) == 1 && r[0].ReceivedAt.After(last) {
					last = r[0].ReceivedAt
				}
			}
		}
	}
	if !last.Before(recv[2].ReceivedAt) {
		t.Errorf("the other users' last message came at %s, after the shared user's third (%s): the pair rate slowed them",
			last, recv[2].ReceivedAt)
	}
}

// TestMessagingLimitHoldsNewUsersBeyondTheTier: with the portfolio at
// TIER_250 (and its 24 hours scaled to a few seconds), a 300-contact
// campaign sends to 250 users, holds 50 with their reason and the time room
// comes, and sends them once the first users leave the window; the
// provider refuses none.
func TestMessagingLimitHoldsNewUsersBeyondTheTier(t *testing.T) {
	h := newHarness(t)
	h.clock.Run()
	const window = 4 * time.Second
	rules := whatsappsim.DefaultRules()
	rules.TimeScale = float64(window) / float64(whatsappsim.MessagingLimitWindow)
	if err := h.sim.SetRules(rules); err != nil {
		t.Fatal(err)
	}
	if err := h.sim.SetPortfolioTier(h.acct.PhoneNumberID, whatsapp.Tier250); err != nil {
		t.Fatal(err)
	}
	h.exec(`INSERT INTO portfolios (company_id, portfolio_id, tier, source) VALUES ($1, $2, 'TIER_250', 'operator')`,
		h.company.ID, h.acct.PhoneNumberID)
	h.paced = true
	cfg := testConfig()
	cfg.MessagingLimitWindow = window + 500*time.Millisecond
	h.start(record.LaneCampaign, cfg)
	b := h.campaignBatch(phones(300), false, nil)
	h.publish(b, "")
	h.waitStates(b.BatchId, map[string]int{"sent": 250, "held": 50}, 10*time.Second)
	held, err := record.BatchHeld(h.ctx, h.pool, b.BatchId)
	if err != nil || len(held) != 1 || held[0].Reason != record.HoldMessagingLimit || held[0].Until == nil {
		t.Fatalf("held: %+v, %v", held, err)
	}
	got := h.waitBatch(b.BatchId, record.BatchCompleted, 20*time.Second)
	if got.Counts[record.StateSent] != 300 {
		t.Fatalf("counts %+v, want 300 sent", got.Counts)
	}
	if st := h.sim.Stats(); st.MessagingLimitRefused != 0 || st.Accepted != 300 {
		t.Fatalf("provider: %d refused for the messaging limit, %d accepted; want 0 and 300", st.MessagingLimitRefused, st.Accepted)
	}
}

// TestSpamRateLimitPausesTheNumbersMarketing: the provider's 131048 on a
// campaign's first sends retries them no sooner than its floor and pauses
// the number's campaign (marketing) sends for every replica, counted by
// metrics an operator alerts on.
func TestSpamRateLimitPausesTheNumbersMarketing(t *testing.T) {
	h := newHarness(t)
	h.clock.Run()
	h.simTemplate()
	if err := h.sim.SetFaults(whatsappsim.Faults{SpamLimited: []string{h.acct.PhoneNumberID}}); err != nil {
		t.Fatal(err)
	}
	h.paced = true
	campaign := h.start(record.LaneCampaign, testConfig())
	c := h.campaignBatch(phones(600), false, nil)
	h.publish(c, "")
	deadline := time.Now().Add(10 * time.Second)
	for h.sim.Stats().Errors["131048"] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no send was refused with 131048: %+v, %v", h.sim.Stats(), h.states(c.BatchId))
		}
		time.Sleep(10 * time.Millisecond)
	}
	var left time.Duration
	var err error
	for left == 0 && err == nil && time.Now().Before(deadline) {
		left, err = h.pacer.MarketingPausedFor(h.ctx, h.company.ID, h.acct.PhoneNumberID)
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil || left < 4*time.Minute {
		t.Fatalf("marketing paused for %v (%v), want about 5 minutes", left, err)
	}
	time.Sleep(time.Second) // what the paused number would have sent meanwhile
	refused := h.sim.Stats().Errors["131048"]
	if refused > 2*200 || h.sim.Stats().Accepted != 0 {
		t.Fatalf("%d refused, %d accepted: the campaign kept sending through the pause", refused, h.sim.Stats().Accepted)
	}
	for _, m := range h.messages(c.BatchId) {
		if m.State == record.StateQueued && m.Code != nil && (*m.Code != 131048 || m.NotBefore.Sub(h.clock.Now()) < 4*time.Minute) {
			t.Fatalf("a refused message is due again at %s with code %d: want no sooner than the 5-minute floor", m.NotBefore, *m.Code)
		}
	}
	if n := testutil.ToFloat64(campaign.m.spamLimits.WithLabelValues(h.acct.PhoneNumberID)); n < 1 {
		t.Fatalf("parley_delivery_spam_rate_limits_total = %v", n)
	}
	if n := testutil.ToFloat64(campaign.m.marketingPaused.WithLabelValues(h.acct.PhoneNumberID)); n != 1 {
		t.Fatalf("parley_delivery_marketing_paused = %v, want 1", n)
	}
}

// TestTemplateSyncRunsInOneProcessPerInterval: two campaign dispatchers
// sweep every second with a template sync due every 3 s; the fleet runs it
// once in the first 3.5 s, not once per dispatcher.
func TestTemplateSyncRunsInOneProcessPerInterval(t *testing.T) {
	h := newHarness(t)
	h.clock.Run()
	var runs atomic.Int64
	h.sync = func(context.Context) (int, error) { runs.Add(1); return 0, nil }
	h.paced = true
	cfg := testConfig()
	// Longer than the test: each process sweeps every second, and only
	// the first sweep of the fleet may sync.
	cfg.TemplateSyncInterval = time.Minute
	h.start(record.LaneCampaign, cfg)
	h.start(record.LaneCampaign, cfg)
	h.start(record.LaneAutomation, cfg)
	eventually(t, 5*time.Second, "the first template sync", func() bool { return runs.Load() > 0 })
	time.Sleep(3 * cfg.SweepInterval)
	if n := runs.Load(); n != 1 {
		t.Fatalf("the template sync ran %d times in three sweeps of three processes, want once per interval", n)
	}
}

// TestRefusedTemplateIsHeldUntilItsChangeIsRead: after a refusal, the
// template version the refused send saw counts as refused by this process
// (its other messages held or failed at their claim, not sent to be
// refused too) until the database shows a newer version.
func TestRefusedTemplateIsHeldUntilItsChangeIsRead(t *testing.T) {
	e := &engine{refusals: map[templateVersion]string{}}
	seen := time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)
	approved := record.TemplateStatus{Status: record.TemplateApproved, ChangedAt: seen}
	if s := e.refusedAs(7, approved); s != "" {
		t.Fatalf("no refusal yet: %q", s)
	}
	e.refusals[templateVersion{7, seen}] = record.TemplatePaused
	for _, c := range []struct {
		ts   record.TemplateStatus
		want string
	}{
		{approved, record.TemplatePaused},
		{record.TemplateStatus{Status: record.TemplateApproved, ChangedAt: seen.Add(time.Second)}, ""},
		{record.TemplateStatus{Status: record.TemplatePaused, ChangedAt: seen.Add(time.Second)}, ""},
	} {
		if got := e.refusedAs(7, c.ts); got != c.want {
			t.Errorf("refusedAs(%+v) = %q, want %q", c.ts, got, c.want)
		}
	}
	if got := e.refusedAs(8, approved); got != "" {
		t.Errorf("another template: %q", got)
	}
}
