//go:build bench

package campaign

import (
	"fmt"
	"net/url"
	"sort"
	"testing"
	"time"

	"github.com/parleyhq/parley/testkit/drillenv"
	"github.com/parleyhq/parley/testkit/drilltally"
)

// rulesRuns is how many runs each of the rules on and off get, alternating.
const rulesRuns = 3

// benchRules is make bench-delivery's check of WhatsApp's realistic rules
// (issue 23): the same 20,000-message campaign load through one dispatcher
// with the pair rate paced by the dispatcher and enforced by provider-sim
// (6 s, 131056 past it) and the portfolio's tier unlimited, against the
// same load with both off; the median rate with the rules on must be
// within 5% of the median with them off, and no send may be refused.
func benchRules(t *testing.T) {
	const n = 20_000
	var on, off []float64
	// Each run in a subtest of its own, so that its processes and database
	// are gone before the next starts.
	run := func(rules bool, i int) (rate float64) {
		t.Run(fmt.Sprintf("rules=%v/%d", rules, i), func(t *testing.T) { rate = rulesRun(t, rules, n) })
		return rate
	}
	for i := 0; i < rulesRuns; i++ {
		off = append(off, run(false, i))
		on = append(on, run(true, i))
	}
	mOn, mOff := median(on), median(off)
	t.Logf("rules off: %.0f msg/s %v; rules on (pair rate 6 s at the provider, paced at 6.5 s here; tier unlimited): %.0f msg/s %v; on/off %.3f (median of %d alternating runs each)",
		mOff, rounded(off), mOn, rounded(on), mOn/mOff, rulesRuns)
	if mOn < 0.95*mOff {
		t.Errorf("with the rules on the dispatcher sends %.0f msg/s, under 95%% of the %.0f msg/s with them off", mOn, mOff)
	}
}

// rulesRun sends n messages (campaigns of 1,000) through one dispatcher and
// returns the rate from the first publish ack to the provider's receipt of
// the last.
func rulesRun(t *testing.T, rules bool, n int) float64 {
	simEnv := []string{"PARLEY_PROVIDER_SIM_LATENCY=0s"}
	dispEnv := []string{"PARLEY_DISPATCH_WORKERS=512", "PARLEY_WHATSAPP_MAX_CONNS=512"}
	if rules {
		simEnv = append(simEnv, "PARLEY_PROVIDER_SIM_PAIR_INTERVAL=6s")
	} else {
		dispEnv = append(dispEnv, "PARLEY_DISPATCH_PAIR_INTERVAL=0")
	}
	e := drillenv.New(t, drillenv.Options{SimEnv: simEnv})
	s := e.NewSender("rules", 1_000_000)
	e.StartCampaign(dispEnv...)
	var first time.Time
	for i := 0; i < n/1000; i++ {
		_, at := e.PublishCampaign(s, e.NextPhones(1000))
		if i == 0 {
			first = at
		}
	}
	e.WaitReceived(int64(n), 5*time.Minute)
	last := e.SimMessages(url.Values{"limit": {"1"}})[0].ReceivedAt
	if errs := e.SimStats().Errors; len(errs) > 0 {
		t.Errorf("rules %v: the provider refused sends: %v", rules, errs)
	}
	// The rate is the provider's; the tally waits for the outcomes that
	// were still being recorded at its last receipt.
	for _, p := range e.Settle(30 * time.Second).Problems(drilltally.Expect{}) {
		t.Errorf("rules %v: %s", rules, p)
	}
	return float64(n) / last.Sub(first).Seconds()
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func rounded(v []float64) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x + 0.5)
	}
	return out
}
