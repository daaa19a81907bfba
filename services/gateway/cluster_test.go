package main

import (
	"bufio"
	"bytes"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/testkit/ratelimittest"
)

// fallbackTotal sums parley_ratelimit_fallback_total over its reasons, read
// from the gateway's /metrics.
func (g *gw) fallbackTotal() float64 {
	g.t.Helper()
	r := g.do("GET", "/metrics", "", nil)
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "parley_ratelimit_fallback_total{"); ok {
			_, v, _ := strings.Cut(rest, "} ")
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				g.t.Fatalf("metric line %q: %v", sc.Text(), err)
			}
			sum += f
		}
	}
	return sum
}

// sendBurst posts n campaign sends for tn at once and returns how many were
// accepted, the statuses seen, and how long the burst took.
func (g *gw) sendBurst(tn tenant, n int) (accepted int, statuses map[int]int, took time.Duration) {
	body := campaignBody(tn.campaign.ID, "+393331234567")
	var mu sync.Mutex
	statuses = map[int]int{}
	var wg sync.WaitGroup
	start := time.Now()
	for range n {
		wg.Go(func() {
			r := g.post("/api/campaigns/send", tn.key, body)
			mu.Lock()
			statuses[r.status]++
			mu.Unlock()
			if r.status == 429 && r.header.Get("Retry-After") == "" {
				g.t.Errorf("429 without Retry-After: %v", r.header)
			}
		})
	}
	wg.Wait()
	return statuses[202], statuses, time.Since(start)
}

// wantAboutTen checks a burst against the campaign limit, 10 per second:
// exactly 10 when it took under 100 ms (one permit's refill), else at most
// one more per 100 ms it lasted; everything else a 429.
func wantAboutTen(t *testing.T, who string, n, accepted int, statuses map[int]int, took time.Duration) {
	t.Helper()
	most := 10 + int(took/(100*time.Millisecond))
	t.Logf("%s: %d of %d accepted in %s, statuses %v", who, accepted, n, took.Round(time.Millisecond), statuses)
	if accepted < 10 || accepted > most || accepted+statuses[429] != n {
		t.Errorf("%s: %d of %d accepted in %s (want 10, at most %d), statuses %v", who, accepted, n, took, most, statuses)
	}
}

// TestGatewayOnRedisCluster: a gateway configured with a three-master Redis
// Cluster limits each company across the masters as on one server (10 of 40
// at once), every decision made by Redis, each company's keys on its
// master; when a master is killed its companies' requests are decided by
// the per-process fallback (202 or 429, never a 5xx) and /readyz stays 200.
func TestGatewayOnRedisCluster(t *testing.T) {
	c := ratelimittest.NewCluster(t)
	cfg := c.Config()
	g := newGateway(t, gwOptions{redis: &cfg})

	// One company whose keys live on each master.
	perNode := make([]tenant, len(c.Nodes))
	found := 0
	for i := 0; found < len(c.Nodes); i++ {
		if i == 40 {
			t.Fatal("40 companies and still a master without one")
		}
		tn := g.fresh()
		n := slices.Index(c.Nodes, c.NodeOf(cfg.RequestKey(ratelimit.CompanyKey(tn.company.ID, "campaigns_send"))))
		if perNode[n].key == "" {
			perNode[n] = tn
			found++
		}
	}

	var wg sync.WaitGroup
	for i, tn := range perNode {
		wg.Go(func() {
			accepted, statuses, took := g.sendBurst(tn, 40)
			wantAboutTen(t, "company on "+c.Nodes[i].Addr(), 40, accepted, statuses, took)
		})
	}
	wg.Wait()
	if n := g.fallbackTotal(); n != 0 {
		t.Fatalf("%v rate-limit decisions fell back with every master up", n)
	}
	for i, tn := range perNode {
		want := cfg.RequestKey(ratelimit.CompanyKey(tn.company.ID, "campaigns_send"))
		if keys := c.Nodes[i].Keys(cfg.KeyPrefix + "rate:"); !slices.Contains(keys, want) {
			t.Fatalf("master %s holds %q, not %s", c.Nodes[i].Addr(), keys, want)
		}
	}

	// A master dies: its companies fall back, the others go on.
	victim := perNode[2]
	c.Nodes[2].Stop()
	accepted, statuses, took := g.sendBurst(victim, 40)
	wantAboutTen(t, "company of the dead master", 40, accepted, statuses, took)
	if g.fallbackTotal() == 0 {
		t.Fatal("no fallback counted with a master dead")
	}
	r := g.do("GET", "/readyz", "", nil)
	if r.status != 200 || r.json(t)["status"] != "ready" {
		t.Fatalf("/readyz with a Redis master dead: %d %s, want 200: the gateway still serves", r.status, r.body)
	}
}
