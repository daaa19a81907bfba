//go:build drill

package whatsapp

// WhatsApp's limits as waits (issue 23): the business portfolio's
// messaging limit budgeted before sending, and the pair rate kept per
// recipient without slowing the rest of a campaign.

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
	"github.com/parleyhq/parley/pkg/record"
	"github.com/parleyhq/parley/testkit/drilltally"
)

// TestDrillMessagingLimit: a portfolio of tier TIER_2K (set at
// provider-sim, whose phone_number_quality_update tells Parley through the
// gateway) with two numbers, and 5,000 new contacts, 2,500 through a
// campaign on each number. The 24 hours are scaled to 20 s at provider-sim
// (time_scale) and at Parley (PARLEY_DISPATCH_MESSAGING_LIMIT_WINDOW).
// Exactly 2,000 unique users reach provider-sim in the first window, the
// other 3,000 are held for messaging_limit (the API's counts.held and each
// message's hold_reason), provider-sim refuses nothing, and the rest go as
// the window frees room: every user exactly once.
func TestDrillMessagingLimit(t *testing.T) {
	const contacts, perNumber = 5_000, 2_500
	const tier, waba, portfolio = whatsapp.Tier2K, "5550001", "5550002"
	limit, _ := whatsapp.TierLimit(tier)
	window := 20 * time.Second
	// Parley's window is Meta's plus a margin for the time between its
	// count (before the send) and the provider's (on receipt): 5 minutes
	// on the real 24 hours, a second here, where 5 minutes scaled would
	// be 70 ms.
	parleyWindow := window + time.Second
	d := newDrill(t, "limit", map[string]any{"time_scale": window.Seconds() / (24 * time.Hour).Seconds()})
	var camps []catalog.Campaign
	for _, name := range []string{"first", "second"} {
		n := d.NewNumber(d.s.Company.ID, name, rate, waba, portfolio)
		c, err := d.Cat.CreateCampaign(d.Ctx, d.s.Company.ID, name, d.s.Tpl.ID, n.ID)
		if err != nil {
			t.Fatal(err)
		}
		camps = append(camps, c)
	}
	d.Sim.Do(http.MethodPut, "/_sim/portfolios/"+portfolio, map[string]any{"tier": tier}, nil)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ps, err := d.Cat.Portfolios(d.Ctx, d.s.Company.ID)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(ps, func(p catalog.Portfolio) bool { return p.ID == portfolio && p.Tier == tier }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Parley never learnt the portfolio's tier from provider-sim's webhook: %+v", ps)
		}
	}
	d.StartCampaign("PARLEY_DISPATCH_MESSAGING_LIMIT_WINDOW="+parleyWindow.String(), "PARLEY_DISPATCH_SWEEP_INTERVAL=500ms")

	start := time.Now()
	phones := d.NextPhones(contacts)
	var ids []string
	for i, c := range camps {
		ids = append(ids, d.SendCampaign(d.api, c.ID, phones[i*perNumber:(i+1)*perNumber])...)
	}
	// The first window: the budget sent, the rest held, as the API shows.
	d.WaitReceived(int64(limit), 30*time.Second)
	var states map[record.State]int
	var held map[record.HoldReason]int
	sent := func() int { return states[record.StateSent] + states[record.StateDelivered] + states[record.StateRead] }
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		states, held = counts(d.batches(ids))
		if (states[record.StateHeld] >= contacts-limit && sent() >= limit) || time.Now().After(deadline) {
			break
		}
	}
	heldAt := time.Now()
	var firstDue time.Time
	for _, b := range d.batches(ids) {
		for _, h := range b.Held {
			if h.Until != nil && (firstDue.IsZero() || h.Until.Before(firstDue)) {
				firstDue = *h.Until
			}
		}
	}
	t.Logf("%s: the API counts %d held (%v), %d sent or after; the first may go at %s", since(start, heldAt), states[record.StateHeld],
		held, sent(), since(start, firstDue))
	if states[record.StateHeld] != contacts-limit || held[record.HoldMessagingLimit] != contacts-limit || sent() != limit ||
		firstDue.Sub(start) < window || heldAt.Sub(start) >= window {
		t.Errorf("%s: held %d (%v), sent %d, the first may go at %s; want %d held for messaging_limit, going no sooner than a window after the first send, and %d sent, within the first window",
			since(start, heldAt), states[record.StateHeld], held, sent(), since(start, firstDue), contacts-limit, limit)
	}
	list := d.messages(ids, record.StateHeld)
	reasons := map[string]int{}
	for _, m := range list {
		r := "<none>"
		if m.HoldReason != nil {
			r = *m.HoldReason
		}
		reasons[r]++
	}
	t.Logf("the message list: %d held, by hold_reason %v", len(list), reasons)
	if len(list) != contacts-limit || reasons[string(record.HoldMessagingLimit)] != contacts-limit {
		t.Errorf("the message list holds %d (%v), want %d with hold_reason messaging_limit", len(list), reasons, contacts-limit)
	}

	tl := d.Settle(3*parleyWindow + 30*time.Second)
	done := time.Now()
	// Counted at provider-sim: unique users per window from the first
	// receipt, and the most in any window (each receipt is a new user
	// while none is duplicated).
	got := d.SimMessages(url.Values{"limit": {"100000"}})
	at := make([]time.Time, len(got))
	for i, m := range got {
		at[i] = m.ReceivedAt
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	var waves []int
	most := 0
	for i, lo := 0, 0; i < len(at); i++ {
		w := int(at[i].Sub(at[0]) / window)
		for len(waves) <= w {
			waves = append(waves, 0)
		}
		waves[w]++
		for at[i].Sub(at[lo]) >= window {
			lo++
		}
		most = max(most, i-lo+1)
	}
	st := d.SimStats()
	var ports []whatsappsim.Portfolio
	d.Sim.Do(http.MethodGet, "/_sim/portfolios", nil, &ports)
	var refusedThere int64
	for _, p := range ports {
		refusedThere += p.Refused
	}
	t.Logf("at provider-sim: unique users per %s window from the first receipt %v, at most %d in any %s (the tier: %d); refused past the limit %d, errors %v",
		window, waves, most, window, limit, st.MessagingLimitRefused+refusedThere, st.Errors)
	if len(waves) == 0 || waves[0] != limit || most > limit || st.MessagingLimitRefused != 0 || refusedThere != 0 || len(st.Errors) != 0 {
		t.Errorf("want exactly %d users in the first window, at most %d in any, no refusal by provider-sim", limit, limit)
	}
	t.Logf("at provider-sim, per recipient: %s", tl)
	for _, p := range tl.Problems(drilltally.Expect{}) {
		t.Errorf("messaging limit: %s", p)
	}
	t.Logf("all %d users reached once %s after the first 202", tl.Received, done.Sub(start).Round(100*time.Millisecond))
	if tl.Received != contacts || len(got) != contacts {
		t.Errorf("%d users reached (%d receipts), want %d", tl.Received, len(got), contacts)
	}
}

// TestDrillPairRate: an automation triggered 3 times within 1 s for one
// contact, then a campaign of 1,000 contacts that includes them, on one
// number; provider-sim refuses a second message from a number to a user
// within 6 s (131056), Parley keeps them PARLEY_DISPATCH_PAIR_INTERVAL
// (6.5 s) apart. Every message is sent, none refused, each pair of the
// contact's messages is at least the interval apart at provider-sim, and
// the campaign's other contacts are not held behind them.
func TestDrillPairRate(t *testing.T) {
	const contacts, triggers = 1_000, 3
	pair := 6500 * time.Millisecond
	d := newDrill(t, "pair", map[string]any{"pair_rate_interval": "6s"})
	d.StartCampaign("PARLEY_DISPATCH_PAIR_INTERVAL=" + pair.String())
	d.StartAutomation("PARLEY_DISPATCH_PAIR_INTERVAL=" + pair.String())
	phones := d.NextPhones(contacts)
	x := phones[contacts/2]

	start := time.Now()
	for i := range triggers {
		if i > 0 {
			time.Sleep(300 * time.Millisecond)
		}
		d.TriggerAutomation(d.api, d.s.Auto.ID, []string{x})
	}
	triggered := time.Since(start)
	campaignAt := time.Now()
	d.SendCampaign(d.api, d.s.Camp.ID, phones)
	t.Logf("%d triggers for %s within %s, then a campaign of %d that includes them", triggers, x, triggered.Round(time.Millisecond), contacts)
	if triggered >= time.Second {
		t.Errorf("the triggers took %s, the drill wants them within 1 s", triggered)
	}

	tl := d.Settle(time.Duration(triggers+1)*pair + 30*time.Second)
	got := d.SimMessages(url.Values{"limit": {"100000"}})
	digits := strings.TrimPrefix(x, "+")
	var toX []time.Time
	var othersDone time.Time
	for _, m := range got {
		if m.To == digits {
			toX = append(toX, m.ReceivedAt)
		} else if m.ReceivedAt.After(othersDone) {
			othersDone = m.ReceivedAt
		}
	}
	slices.SortFunc(toX, func(a, b time.Time) int { return a.Compare(b) })
	var gaps []string
	closest := time.Duration(-1)
	for i := 1; i < len(toX); i++ {
		g := toX[i].Sub(toX[i-1])
		gaps = append(gaps, g.Round(10*time.Millisecond).String())
		if closest < 0 || g < closest {
			closest = g
		}
	}
	st := d.SimStats()
	t.Logf("at provider-sim: %d messages to %s, %v apart (want %d, each at least %s); refused with 131056: %d",
		len(toX), x, gaps, triggers+1, pair, st.Errors["131056"])
	if len(toX) != triggers+1 || closest < pair || st.Errors["131056"] != 0 {
		t.Errorf("%d messages to the contact, closest %s apart, %d refused with 131056", len(toX), closest, st.Errors["131056"])
	}
	t.Logf("the campaign's %d other contacts all at provider-sim %s after its 202 (want less than the pair interval: none waited for it)",
		contacts-1, othersDone.Sub(campaignAt).Round(10*time.Millisecond))
	if othersDone.Sub(campaignAt) >= pair {
		t.Errorf("the campaign's other contacts took %s: they waited as long as a pair interval", othersDone.Sub(campaignAt))
	}
	// Per recipient: the contact got its four messages, every other
	// contact one, nothing lost, failed or left open.
	sends, err := drilltally.Sim{URL: d.Sim.Base}.Counts(d.Ctx, phones)
	if err != nil {
		t.Fatal(err)
	}
	others := 0
	for _, p := range phones {
		if p != x && sends[p] == 1 {
			others++
		}
	}
	t.Logf("at provider-sim, per recipient: %s; %s got %d, %d of the %d others exactly one", tl, x, sends[x], others, contacts-1)
	if tl.Lost != 0 || tl.Failed != 0 || tl.Open != 0 || tl.Strangers != 0 || tl.Unrecorded != 0 || tl.Rows != contacts+triggers ||
		sends[x] != triggers+1 || others != contacts-1 {
		t.Errorf("want every message sent once: %d to the contact and one to each other, nothing lost, failed or open", triggers+1)
	}
}
