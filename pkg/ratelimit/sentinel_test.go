package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/testkit/ratelimittest"
)

// TestSentinelFindsMasterAndFailsOver: in sentinel mode the limiter finds
// the master through the sentinels; when the master is killed it falls back
// while the sentinels promote the replica, then goes on against the new
// master with the company's state it had replicated.
func TestSentinelFindsMasterAndFailsOver(t *testing.T) {
	s := ratelimittest.NewSentinel(t)
	cfg := s.Config()
	l, reg := newLimiter(t, cfg)
	lim := ratelimit.Every(5, time.Hour) // no refill during the test
	key := ratelimit.CompanyKey(7, "campaigns_send")

	for i := range 5 {
		if res := l.Allow(context.Background(), key, lim); !res.Allowed || res.Local {
			t.Fatalf("request %d: %+v, want allowed by Redis", i+1, res)
		}
	}
	if res := l.Allow(context.Background(), key, lim); res.Allowed || res.Local {
		t.Fatalf("request 6: %+v, want refused by Redis", res)
	}
	if keys := s.Master.Keys(cfg.KeyPrefix); len(keys) != 1 || keys[0] != cfg.RequestKey(key) {
		t.Fatalf("the master holds %q, want the limiter's key", keys)
	}

	s.WaitReplicated()
	s.Master.Stop()
	deadline := time.Now().Add(30 * time.Second)
	var res ratelimit.Result
	for {
		res = l.Allow(context.Background(), key, lim)
		if !res.Local {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no answer from Redis within 30s of the master's death: the sentinels did not fail over, or the client did not follow")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The answer came from the promoted replica, which the sentinels agree on.
	s.WaitMaster(s.Replica.Addr())
	// The promoted replica had the five requests: the sixth is still refused.
	if res.Allowed {
		t.Fatalf("first answer after the failover: %+v, want refused (state replicated)", res)
	}
	if n := fallbacks(t, reg); n < 1 {
		t.Fatal("no fallback counted while the master was away")
	}
}
