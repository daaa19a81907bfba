package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/testkit/ratelimittest"
)

// slack is what a loaded CI machine (two cores, -race) may add to a
// deadline before a call returns.
const slack = 250 * time.Millisecond

// allowTimed is Allow, failing the test if it took longer than the timeout.
func allowTimed(t *testing.T, l *ratelimit.Limiter, cfg ratelimit.RedisConfig, key string, lim ratelimit.Limit) ratelimit.Result {
	t.Helper()
	start := time.Now()
	res := l.Allow(context.Background(), key, lim)
	if d := time.Since(start); d > cfg.Timeout+slack {
		t.Fatalf("Allow took %s with a timeout of %s", d, cfg.Timeout)
	}
	return res
}

// waitRecovered calls Allow until Redis answers again.
func waitRecovered(t *testing.T, l *ratelimit.Limiter, key string, lim ratelimit.Limit) ratelimit.Result {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if res := l.Allow(context.Background(), key, lim); !res.Local {
			return res
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the limiter did not go back to Redis within 10s")
	return ratelimit.Result{}
}

func TestAllowFallsBackWhenRedisDiesAndRecovers(t *testing.T) {
	srv := ratelimittest.NewServer(t)
	cfg := srv.Config()
	l, reg := newLimiter(t, cfg)
	lim := ratelimit.Every(5, time.Hour) // no refill during the test

	for range 2 {
		if res := allowTimed(t, l, cfg, "company-1", lim); !res.Allowed || res.Local {
			t.Fatalf("with Redis up: %+v, want allowed by Redis", res)
		}
	}

	srv.Stop()
	// The per-process limiter knows nothing of the two requests Redis
	// counted: it enforces the limit from a fresh start, 5 and no more.
	allowed := 0
	for i := range 20 {
		res := allowTimed(t, l, cfg, "company-1", lim)
		if !res.Local {
			t.Fatalf("call %d with Redis down was not answered locally: %+v", i, res)
		}
		if res.Allowed {
			allowed++
		} else if res.RetryAfter <= 0 || res.Remaining != 0 {
			t.Fatalf("local refusal %+v lacks its retry time", res)
		}
	}
	if allowed != 5 {
		t.Fatalf("local limiter allowed %d of 20, want 5", allowed)
	}
	if n := metric(t, reg, "parley_ratelimit_fallback_total", "reason=error"); n < 1 {
		t.Fatalf("fallback_total{reason=error} = %v, want at least 1", n)
	}
	if n := metric(t, reg, "parley_ratelimit_fallback_total", "reason=circuit_open"); n < 1 {
		t.Fatalf("fallback_total{reason=circuit_open} = %v: the breaker never skipped Redis", n)
	}
	if g := metric(t, reg, "parley_ratelimit_degraded", ""); g != 1 {
		t.Fatalf("degraded = %v during the outage, want 1", g)
	}
	// Throughput limits fall back the same way.
	if n, _ := l.Take(context.Background(), "account-1", 10, 3); n != 1 {
		t.Fatalf("Take during the outage granted %d, want its local burst of 1", n)
	}

	srv.Start() // empty: the restarted server lost all state
	res := waitRecovered(t, l, "company-1", lim)
	if !res.Allowed || res.Remaining != 4 {
		t.Fatalf("first call after recovery: %+v, want allowed with 4 remaining", res)
	}
	if g := metric(t, reg, "parley_ratelimit_degraded", ""); g != 0 {
		t.Fatalf("degraded = %v after recovery, want 0", g)
	}
}

func TestAllowIsBoundedWhenRedisStalls(t *testing.T) {
	srv := ratelimittest.NewServer(t)
	cfg := srv.Config()
	l, reg := newLimiter(t, cfg)
	lim := ratelimit.PerSecond(10)
	if res := allowTimed(t, l, cfg, "company-1", lim); res.Local {
		t.Fatalf("with Redis up: %+v", res)
	}

	// DEBUG SLEEP blocks the whole server: connections stay open, nothing
	// answers, the worst kind of slow.
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	stalled := make(chan error, 1)
	go func() { stalled <- admin.Do(context.Background(), "DEBUG", "SLEEP", "1.5").Err() }()
	time.Sleep(50 * time.Millisecond) // let the sleep start

	start := time.Now()
	local := 0
	for range 30 {
		res := allowTimed(t, l, cfg, "company-1", lim)
		if res.Local {
			local++
		}
	}
	if local != 30 {
		t.Fatalf("%d of 30 calls were answered locally while Redis slept", local)
	}
	if d := time.Since(start); d > 10*cfg.Timeout+slack {
		t.Fatalf("30 calls took %s: the breaker did not spare them the timeout", d)
	}
	if n := metric(t, reg, "parley_ratelimit_fallback_total", "reason=timeout"); n < 1 {
		t.Fatalf("fallback_total{reason=timeout} = %v, want at least 1", n)
	}
	if err := <-stalled; err != nil {
		t.Fatalf("DEBUG SLEEP: %v", err)
	}
	waitRecovered(t, l, "company-1", lim)
}

func TestAllowCanceledByCallerDoesNotTripTheBreaker(t *testing.T) {
	cfg := ratelimittest.Config(t)
	l, reg := newLimiter(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 10 {
		if res := l.Allow(ctx, "k", ratelimit.PerSecond(10)); !res.Local || !res.Allowed {
			t.Fatalf("canceled call: %+v, want allowed locally", res)
		}
	}
	if n := metric(t, reg, "parley_ratelimit_fallback_total", "reason=canceled"); n != 10 {
		t.Fatalf("fallback_total{reason=canceled} = %v, want 10", n)
	}
	if g := metric(t, reg, "parley_ratelimit_degraded", ""); g != 0 {
		t.Fatal("canceled calls opened the breaker")
	}
	if res := l.Allow(context.Background(), "k", ratelimit.PerSecond(10)); res.Local {
		t.Fatalf("after canceled calls: %+v, want Redis", res)
	}
}
