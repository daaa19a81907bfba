package ratelimit_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/testkit/ratelimittest"
)

// fallbacks is parley_ratelimit_fallback_total over every reason.
func fallbacks(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	var n float64
	for _, r := range []string{ratelimit.ReasonTimeout, ratelimit.ReasonError, ratelimit.ReasonCircuitOpen, ratelimit.ReasonCanceled} {
		n += metric(t, reg, "parley_ratelimit_fallback_total", "reason="+r)
	}
	return n
}

// companiesPerNode returns one company id whose keys live on each node of c,
// in the order of c.Nodes.
func companiesPerNode(t *testing.T, c *ratelimittest.Cluster, cfg ratelimit.RedisConfig) []int64 {
	t.Helper()
	out := make([]int64, len(c.Nodes))
	found := 0
	for id := int64(1); found < len(c.Nodes) && id < 1000; id++ {
		n := slices.Index(c.Nodes, c.NodeOf(cfg.RequestKey(ratelimit.CompanyKey(id, "x"))))
		if out[n] == 0 {
			out[n] = id
			found++
		}
	}
	if found < len(c.Nodes) {
		t.Fatal("no company id for some node")
	}
	return out
}

// burst sends n Allows on key at once and counts the allowed and the local
// answers.
func burst(l *ratelimit.Limiter, key string, lim ratelimit.Limit, n int) (allowed, local int) {
	var a, lo atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			res := l.Allow(context.Background(), key, lim)
			if res.Allowed {
				a.Add(1)
			}
			if res.Local {
				lo.Add(1)
			}
		})
	}
	wg.Wait()
	return int(a.Load()), int(lo.Load())
}

// TestClusterLimitsStayExact: on a three-master Redis Cluster, 40 requests
// at once for each of three companies, one per master, sent as one flow of
// pipelines that the client splits by node, are allowed exactly 10 each, all
// decided by Redis; a company's request and throughput keys share its node.
func TestClusterLimitsStayExact(t *testing.T) {
	c := ratelimittest.NewCluster(t)
	cfg := c.Config()
	l, reg := newLimiter(t, cfg)
	lim := ratelimit.Every(10, time.Hour) // no refill during the test
	companies := companiesPerNode(t, c, cfg)

	type count struct{ allowed, local int }
	got := make([]count, len(companies))
	var wg sync.WaitGroup
	for i, co := range companies {
		wg.Go(func() {
			a, lo := burst(l, ratelimit.CompanyKey(co, "campaigns_send"), lim, 40)
			got[i] = count{a, lo}
		})
	}
	wg.Wait()
	for i, co := range companies {
		t.Logf("company %d on master %s: %d of 40 allowed, %d decided locally", co, c.Nodes[i].Addr(), got[i].allowed, got[i].local)
		if got[i].allowed != 10 || got[i].local != 0 {
			t.Errorf("company %d (node %s): %d of 40 allowed, %d answered locally; want 10 by Redis", co, c.Nodes[i].Addr(), got[i].allowed, got[i].local)
		}
	}
	if n := fallbacks(t, reg); n != 0 {
		t.Fatalf("%v fallbacks with every master up", n)
	}

	// Throughput keys (the dispatchers') sit beside the company's request
	// keys: one node holds both.
	for i, co := range companies {
		acct := ratelimit.CompanyKey(co, "account:"+strconv.FormatInt(co*100, 10))
		if n, _ := l.Take(context.Background(), acct, 100, 3); n != 3 {
			t.Fatalf("Take on %s granted %d, want 3", acct, n)
		}
		want := []string{cfg.RequestKey(ratelimit.CompanyKey(co, "campaigns_send")), cfg.ThroughputKey(acct)}
		keys := c.Nodes[i].Keys(cfg.KeyPrefix)
		slices.Sort(keys)
		slices.Sort(want)
		if !slices.Equal(keys, want) {
			t.Fatalf("node %s holds %q, want company %d's keys %q", c.Nodes[i].Addr(), keys, co, want)
		}
	}
}

// TestClusterMasterKilledFallsBack: a master SIGKILLed while requests for
// companies on every master are in flight turns its companies' calls into
// per-process decisions (parley_ratelimit_fallback_total), never an error or
// a wrong refusal; those limits still hold (10 of 40, locally); the other
// masters keep answering; and the restarted master is used again.
func TestClusterMasterKilledFallsBack(t *testing.T) {
	c := ratelimittest.NewCluster(t)
	cfg := c.Config()
	l, reg := newLimiter(t, cfg)
	companies := companiesPerNode(t, c, cfg)
	victim := 1 // companies[1] lives on c.Nodes[1]
	roomy := ratelimit.PerSecond(1_000_000)

	// Load on every master; the victim is killed mid-run.
	var calls, refused, localVictim atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, co := range companies {
		for range 4 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					res := l.Allow(context.Background(), ratelimit.CompanyKey(co, "load"), roomy)
					calls.Add(1)
					if !res.Allowed {
						refused.Add(1)
					}
					if res.Local && i == victim {
						localVictim.Add(1)
					}
				}
			})
		}
	}
	waitCalls := func(n int64) {
		deadline := time.Now().Add(20 * time.Second)
		for calls.Load() < n {
			if time.Now().After(deadline) {
				close(stop)
				t.Fatalf("only %d calls made", calls.Load())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitCalls(300)
	if n := fallbacks(t, reg); n != 0 {
		t.Fatalf("%v fallbacks before the kill", n)
	}
	c.Nodes[victim].Stop()
	waitCalls(calls.Load() + 600)
	close(stop)
	wg.Wait()
	if n := refused.Load(); n != 0 {
		t.Fatalf("%d of %d calls refused under a limit none reached", n, calls.Load())
	}
	if localVictim.Load() == 0 {
		t.Fatal("no call for the dead master's company was answered locally")
	}
	if n := metric(t, reg, "parley_ratelimit_fallback_total", "reason=error") + metric(t, reg, "parley_ratelimit_fallback_total", "reason=timeout"); n < 1 {
		t.Fatalf("fallback_total{reason=error|timeout} = %v after a master died", n)
	}

	// The dead master's companies keep an exact limit, per process.
	lim := ratelimit.Every(10, time.Hour)
	t.Logf("master %s killed mid-run: %d calls, %d refused, %d of the dead master's company's decided locally; fallbacks %v",
		c.Nodes[victim].Addr(), calls.Load(), refused.Load(), localVictim.Load(), fallbacks(t, reg))
	a, lo := burst(l, ratelimit.CompanyKey(companies[victim], "campaigns_send"), lim, 40)
	t.Logf("dead master's company: %d of 40 allowed, %d decided locally", a, lo)
	if a != 10 || lo != 40 {
		t.Fatalf("dead master's company: %d of 40 allowed, %d locally; want 10, all locally", a, lo)
	}
	// The live masters still answer: once the breaker probes with one of
	// their keys, Redis decides again.
	live := ratelimit.CompanyKey(companies[0], "campaigns_send")
	deadline := time.Now().Add(10 * time.Second)
	for l.Allow(context.Background(), live, lim).Local {
		if time.Now().After(deadline) {
			t.Fatal("a live master's company was never answered by Redis while one master was down")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Back: the restarted master (empty) rejoins with its slots.
	c.Nodes[victim].Start()
	c.WaitHealthy()
	key := ratelimit.CompanyKey(companies[victim], "after")
	deadline = time.Now().Add(10 * time.Second)
	for {
		res := l.Allow(context.Background(), key, lim)
		if !res.Local {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the restarted master was not used again within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClusterPipelineEveryCallerGetsItsOwnReply: the limiter's pipelines,
// whose commands name keys on every master, are split by node and every
// caller still gets its own reply; a script new to the nodes goes through
// NOSCRIPT and EVAL on each.
func TestClusterPipelineEveryCallerGetsItsOwnReply(t *testing.T) {
	c := ratelimittest.NewCluster(t)
	cfg := c.Config()
	everyCallerGetsItsOwnReply(t, cfg, 30, 100)
	for _, n := range c.Nodes {
		if len(n.Keys(cfg.KeyPrefix)) == 0 {
			t.Fatalf("node %s got none of the 30 keys: the pipelines did not span the masters", n.Addr())
		}
	}
}
