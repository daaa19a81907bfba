//go:build bench

package automation

// make bench-delivery, the automation part: an automation trigger's
// latency, publish ack to the provider's receipt, while another company's
// campaign backlog keeps the campaign dispatcher busy on the same
// provider. The real binaries (testkit/drillenv builds both dispatchers and
// provider-sim once, in TestMain) run on this machine's shared cores; the
// figure is printed and its target (p99 < 1 s) checked.

import (
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/testkit/drillenv"
)

// TestMain builds the binaries; with the bench tag it replaces the goroutine
// leak check of leak_test.go (the bench runs processes, not goroutines).
func TestMain(m *testing.M) { drillenv.Main(m) }

func TestBenchDelivery(t *testing.T) {
	t.Run("AutomationDuringBacklog/campaign=80per_s", func(t *testing.T) { benchFairness(t, 80) })
	t.Run("AutomationDuringBacklog/campaign=2000per_s", func(t *testing.T) { benchFairness(t, 2000) })
}

// benchFairness builds a 20,000-message campaign backlog on one company's
// account (at campaignRate messages per second), then triggers another
// company's automation for one new contact every 100 ms and measures each
// trigger from its publish ack to the provider's receipt.
func benchFairness(t *testing.T, campaignRate int) {
	e := drillenv.New(t, drillenv.Options{})
	big := e.NewSender("backlog", campaignRate)
	other := e.NewSender("other", 80)
	e.StartCampaign()
	e.StartAutomation()
	for range 20 {
		e.PublishCampaign(big, e.NextPhones(1000))
	}
	for e.Count(`SELECT count(*) FROM messages WHERE lane = 'campaign'`) < 20_000 {
		time.Sleep(20 * time.Millisecond)
	}
	const triggers = 100
	acked := map[string]time.Time{}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	startSent := e.Count(`SELECT count(*) FROM messages WHERE lane = 'campaign' AND state = 'sent'`)
	began := time.Now()
	for range triggers {
		<-tick.C
		ph := e.NextPhones(1)[0]
		_, at := e.PublishAutomation(other, []string{ph})
		acked[strings.TrimPrefix(ph, "+")] = at
	}
	deadline := time.Now().Add(30 * time.Second)
	var msgs []drillenv.SimReceived
	for {
		msgs = e.SimMessages(url.Values{"phone_number_id": {other.Acct.PhoneNumberID}, "limit": {"1000"}})
		if len(msgs) >= triggers || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	window := time.Since(began)
	campaignSent := e.Count(`SELECT count(*) FROM messages WHERE lane = 'campaign' AND state = 'sent'`) - startSent
	backlog := e.Count(`SELECT count(*) FROM messages WHERE lane = 'campaign' AND state IN ('queued', 'sending')`)
	var lat []time.Duration
	for _, m := range msgs {
		if at, ok := acked[m.To]; ok {
			lat = append(lat, m.ReceivedAt.Sub(at))
		}
	}
	if len(lat) != triggers {
		t.Fatalf("%d of %d triggers reached the provider", len(lat), triggers)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	t.Logf("campaign backlog of 20,000 at %d/s on one account (%d sent during the %s window, %d still waiting): automation trigger publish ack -> provider receipt over %d triggers: p50 %s, p99 %s, max %s",
		campaignRate, campaignSent, window.Round(time.Millisecond), backlog, len(lat),
		q(0.50).Round(100*time.Microsecond), q(0.99).Round(100*time.Microsecond), lat[len(lat)-1].Round(100*time.Microsecond))
	if q(0.99) >= time.Second {
		t.Errorf("automation p99 %s, target < 1 s", q(0.99))
	}
}
