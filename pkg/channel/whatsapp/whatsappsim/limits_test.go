package whatsappsim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
)

// waitFailed polls until the message got its failed status (its code), or
// a delivered one (0).
func (h *hooks) waitOutcome(t *testing.T, wamid string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if code := h.failedWith(wamid); code != 0 {
			return code
		}
		h.mu.Lock()
		for _, u := range h.statuses {
			if u.MessageID == wamid && u.Status == whatsapp.StatusDelivered {
				h.mu.Unlock()
				return 0
			}
		}
		h.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no outcome for %s", wamid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPortfolioMessagingLimit(t *testing.T) {
	h := newHooks(t)
	rules := whatsappsim.DefaultRules()
	rules.TimeScale = 0.00004 // the moving 24 hours last about 3.5 s
	e := start(t, whatsappsim.Config{
		Throughput: 1_000_000,
		Accounts: []whatsappsim.Account{
			{PhoneNumberID: pnid, Token: token, WABAID: waba, PortfolioID: "acme"},
			{PhoneNumberID: "2002", Token: "other-token", WABAID: "6006", PortfolioID: "acme"},
			{PhoneNumberID: "3003", Token: "third-token"}, // its own portfolio, unlimited
		},
		Callbacks: callbackConfig(h.URL),
		Rules:     &rules,
	}, 5*time.Second)
	second := whatsapp.Account{PhoneNumberID: "2002", AccessToken: "other-token"}
	third := whatsapp.Account{PhoneNumberID: "3003", AccessToken: "third-token"}
	sendAs := func(a whatsapp.Account, to whatsapp.Recipient) string {
		t.Helper()
		id, err := e.cl.SendTemplate(context.Background(), a, tpl, to, whatsapp.Overrides{})
		if err != nil {
			t.Fatalf("send: %v", err)
		}
		return id
	}

	var ports []whatsappsim.Portfolio
	getJSON(t, e.srv.URL+"/_sim/portfolios", &ports)
	if len(ports) != 2 || ports[0].ID != "3003" || ports[1].ID != "acme" || ports[1].Tier != whatsapp.TierUnlimited ||
		fmt.Sprint(ports[1].PhoneNumberIDs) != "[1001 2002]" {
		t.Fatalf("portfolios = %+v", ports)
	}
	if code, body := call(t, "PUT", e.srv.URL+"/_sim/portfolios/acme", "", `{"tier":"TIER_250"}`); code != 200 || !strings.Contains(body, `"limit":250`) {
		t.Fatalf("PUT tier: %d %s", code, body)
	}
	// Each number of the portfolio hears of its new limit.
	changes := h.wait(t, whatsapp.FieldPhoneNumberQuality, 2)
	for i, want := range []struct{ waba, number string }{{waba, pnid}, {"6006", "2002"}} {
		var v whatsapp.PhoneNumberQualityUpdate
		_ = json.Unmarshal(changes[i].value, &v)
		if changes[i].waba != want.waba || v.DisplayPhoneNumber != want.number || v.Event != "DOWNGRADE" || v.OldLimit != whatsapp.TierUnlimited ||
			v.CurrentLimit != whatsapp.Tier250 || v.WhatsAppBusinessManagerMessagingLimit != whatsapp.Tier250 || v.MaxDailyConversationsPerBusiness != whatsapp.Tier250 {
			t.Errorf("phone_number_quality_update %d = %s: %+v", i, changes[i].waba, v)
		}
	}

	// 250 unique users between the two numbers; sending again to one of
	// them costs nothing; the 251st new user is refused: accepted, then a
	// failed status (131049 by default).
	began := time.Now()
	for n := range 250 {
		from := acct
		if n%2 == 1 {
			from = second
		}
		sendAs(from, recipient(n))
	}
	sendAs(second, recipient(0))
	refused := sendAs(acct, recipient(250))
	// A user whose service window is open is not counted.
	e.reply(t, recipient(251).Phone, 0)
	inWindow := sendAs(acct, recipient(251))
	// Another portfolio is not limited.
	other := sendAs(third, recipient(252))
	if time.Since(began) > 2*time.Second {
		t.Skipf("the machine is too slow for the scaled 24 hours (%v)", time.Since(began))
	}
	if code := h.waitOutcome(t, refused); code != 131049 {
		t.Errorf("past the limit: %d, want 131049", code)
	}
	for _, id := range []string{inWindow, other} {
		if code := h.waitOutcome(t, id); code != 0 {
			t.Errorf("%s failed with %d", id, code)
		}
	}
	if st := e.sim.Stats(); st.MessagingLimitRefused != 1 {
		t.Errorf("messaging_limit_refused = %d", st.MessagingLimitRefused)
	}
	getJSON(t, e.srv.URL+"/_sim/portfolios", &ports)
	if p := ports[1]; p.Reached != 250 || p.Refused != 1 {
		t.Errorf("acme = %+v", p)
	}

	// The other way: answered at once, with a code the rules choose.
	if code, _ := call(t, "PATCH", e.srv.URL+"/_sim/rules", "", `{"messaging_limit_error":"sync","messaging_limit_code":130472}`); code != 200 {
		t.Fatal("PATCH rules")
	}
	_, err := e.cl.SendTemplate(context.Background(), acct, tpl, recipient(253), whatsapp.Overrides{})
	if pe := providerError(t, err); pe.HTTPStatus != 400 || pe.Code != 130472 {
		t.Errorf("sync refusal: %+v", pe)
	}

	// Room frees as the moving 24 hours pass.
	time.Sleep(time.Until(began.Add(3600 * time.Millisecond)))
	if code := h.waitOutcome(t, sendAs(acct, recipient(254))); code != 0 {
		t.Errorf("after the window: %d", code)
	}

	for _, c := range []struct {
		path, body string
		status     int
	}{
		{"/_sim/portfolios/acme", `{"tier":"TIER_1K"}`, 400},
		{"/_sim/portfolios/nobody", `{"tier":"TIER_2K"}`, 404},
	} {
		if code, body := call(t, "PUT", e.srv.URL+c.path, "", c.body); code != c.status {
			t.Errorf("PUT %s %s: %d %s", c.path, c.body, code, body)
		}
	}
	if err := e.sim.SetPortfolioTier("acme", whatsapp.TierUnlimited); err != nil {
		t.Fatal(err)
	}
	changes = h.wait(t, whatsapp.FieldPhoneNumberQuality, 4)
	var up whatsapp.PhoneNumberQualityUpdate
	_ = json.Unmarshal(changes[3].value, &up)
	if up.Event != "UPGRADE" || up.OldLimit != whatsapp.Tier250 || up.WhatsAppBusinessManagerMessagingLimit != whatsapp.TierUnlimited {
		t.Errorf("upgrade = %+v", up)
	}
	// A reset forgets the reach and puts the tiers back to unlimited.
	_ = e.sim.SetPortfolioTier("acme", whatsapp.Tier2K)
	e.sim.Reset()
	getJSON(t, e.srv.URL+"/_sim/portfolios", &ports)
	if p := ports[1]; p.Tier != whatsapp.TierUnlimited || p.Reached != 0 || p.Refused != 0 {
		t.Errorf("after a reset: %+v", p)
	}
	if h.badSigs.Load() != 0 {
		t.Errorf("%d bad signatures", h.badSigs.Load())
	}
}

func TestPairRateRule(t *testing.T) {
	e := start(t, whatsappsim.Config{Throughput: 1_000_000}, 5*time.Second)
	if code, body := call(t, "PATCH", e.srv.URL+"/_sim/rules", "", `{"pair_rate_interval":"300ms"}`); code != 200 || !strings.Contains(body, `"pair_rate_interval":"300ms"`) {
		t.Fatalf("PATCH rules: %d %s", code, body)
	}
	if _, err := e.send(recipient(1)); err != nil {
		t.Fatal(err)
	}
	pe := providerError(t, sendErr(e, tpl))
	if pe.Code != 131056 || pe.Class != whatsapp.RetryLater {
		t.Errorf("second message within the interval: %+v", pe)
	}
	if _, err := e.send(recipient(2)); err != nil {
		t.Errorf("another user is not held back: %v", err)
	}
	// The old spelling reads and writes the same rule.
	var f map[string]any
	getJSON(t, e.srv.URL+"/_sim/faults", &f)
	if f["pair_interval_ms"] != float64(300) {
		t.Errorf("faults = %v", f)
	}
	if code, _ := call(t, "PATCH", e.srv.URL+"/_sim/faults", "", `{"pair_interval_ms":0}`); code != 200 {
		t.Fatal("PATCH faults")
	}
	if r := e.sim.Rules(); r.PairRateInterval != 0 {
		t.Errorf("pair_interval_ms 0 left the rule at %v", r.PairRateInterval)
	}
	if _, err := e.send(recipient(1)); err != nil {
		t.Errorf("with the rule off: %v", err)
	}
	if err := e.sim.SetFaults(whatsappsim.Faults{PairInterval: time.Second}); err != nil || e.sim.Rules().PairRateInterval != time.Second {
		t.Errorf("SetFaults(PairInterval) sets the rule: %v %v", e.sim.Rules().PairRateInterval, err)
	}
	if code, _ := call(t, "PATCH", e.srv.URL+"/_sim/rules", "", `{"pair_rate_interval":"-1s"}`); code != 400 {
		t.Errorf("a negative interval: %d", code)
	}
}

func TestMarketingLimitShare(t *testing.T) {
	h := newHooks(t)
	rules := whatsappsim.DefaultRules()
	rules.TimeScale = 0.00002 // a day is about 1.7 s
	rules.MarketingLimitShare = 0.5
	e := start(t, whatsappsim.Config{Throughput: 1_000_000, Callbacks: callbackConfig(h.URL), Rules: &rules}, 5*time.Second)
	if err := e.sim.SetTemplate(whatsappsim.TemplateSpec{Name: "order_update", Language: "en_US", Header: whatsapp.HeaderImage, BodyParameters: 2, URLButtons: 1}); err != nil {
		t.Fatal(err)
	}
	receipt := tpl
	receipt.Name = "receipt"
	if err := e.sim.SetTemplate(whatsappsim.TemplateSpec{Name: "receipt", Language: "en_US", Header: whatsapp.HeaderImage, BodyParameters: 2, URLButtons: 1, Category: whatsapp.CategoryUtility}); err != nil {
		t.Fatal(err)
	}
	outcomes := func(tp whatsapp.Template) []int {
		ids := make([]string, 40)
		for n := range ids {
			id, err := e.cl.SendTemplate(context.Background(), acct, tp, recipient(n), whatsapp.Overrides{})
			if err != nil {
				t.Fatal(err)
			}
			ids[n] = id
		}
		out := make([]int, len(ids))
		for n, id := range ids {
			out[n] = h.waitOutcome(t, id)
		}
		return out
	}
	// Decisions are per (user, scaled day): start at the beginning of one.
	day := time.Duration(float64(whatsappsim.MarketingLimitDay) * rules.TimeScale)
	time.Sleep(day - time.Duration(time.Now().UnixNano()%int64(day)) + 10*time.Millisecond)
	began := time.Now()
	first := outcomes(tpl)
	again := outcomes(tpl)
	utility := outcomes(receipt)
	if time.Since(began) > 1500*time.Millisecond {
		t.Skipf("the machine is too slow for the scaled day (%v)", time.Since(began))
	}
	declined := 0
	for n := range first {
		if first[n] != 0 && first[n] != 131049 || again[n] != first[n] {
			t.Errorf("user %d: %d then %d: a resend within the day must fail again", n, first[n], again[n])
		}
		if first[n] == 131049 {
			declined++
		}
		if utility[n] != 0 {
			t.Errorf("a UTILITY template failed with %d", utility[n])
		}
	}
	if declined < 8 || declined > 32 {
		t.Errorf("%d of 40 users declined at a share of 0.5", declined)
	}
	if st := e.sim.Stats(); st.MarketingLimitDeclined != int64(2*declined) {
		t.Errorf("marketing_limit_declined = %d, want %d", st.MarketingLimitDeclined, 2*declined)
	}
	// Switched off, a user declined within the (scaled) day is still
	// declined, as Meta says of a resend within 24 hours; after it, not.
	if code, _ := call(t, "PATCH", e.srv.URL+"/_sim/rules", "", `{"marketing_limit_share":0.000001}`); code != 200 {
		t.Fatal("PATCH rules")
	}
	var victim int
	for n, c := range first {
		if c == 131049 {
			victim = n
			break
		}
	}
	id, _ := e.cl.SendTemplate(context.Background(), acct, tpl, recipient(victim), whatsapp.Overrides{})
	if code := h.waitOutcome(t, id); code != 131049 && time.Since(began) < 1500*time.Millisecond {
		t.Errorf("a resend within the day: %d", code)
	}
	time.Sleep(time.Until(began.Add(3600 * time.Millisecond)))
	id, _ = e.cl.SendTemplate(context.Background(), acct, tpl, recipient(victim), whatsapp.Overrides{})
	if code := h.waitOutcome(t, id); code != 0 {
		t.Errorf("after the day: %d", code)
	}
	if code, _ := call(t, "PATCH", e.srv.URL+"/_sim/rules", "", `{"marketing_limit_share":1.5}`); code != 400 {
		t.Errorf("a share above 1: %d", code)
	}
}
