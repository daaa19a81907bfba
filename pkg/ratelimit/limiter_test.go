package ratelimit_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap/zaptest"

	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/testkit/ratelimittest"
)

// newLimiter returns a limiter on cfg with its own metrics registry.
func newLimiter(t *testing.T, cfg ratelimit.RedisConfig) (*ratelimit.Limiter, *prometheus.Registry) {
	t.Helper()
	rdb := ratelimit.NewRedisClient(cfg)
	t.Cleanup(func() { _ = rdb.Close() })
	reg := prometheus.NewRegistry()
	l, err := ratelimit.New(rdb, cfg, zaptest.NewLogger(t), reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l, reg
}

// metric reads a counter or gauge from reg; label is "name=value" or "".
func metric(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" || hasLabel(m, label) {
				if c := m.GetCounter(); c != nil {
					return c.GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

func hasLabel(m *dto.Metric, label string) bool {
	name, value, _ := strings.Cut(label, "=")
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name && lp.GetValue() == value {
			return true
		}
	}
	return false
}

func TestAllowAtEachRouteLimit(t *testing.T) {
	tests := []struct {
		lim         ratelimit.Limit
		text        string
		retryHeader string // Retry-After once the burst is spent
	}{
		{ratelimit.PerSecond(10), "Rate limit exceeded: 10 per 1 second", "1"},
		{ratelimit.PerSecond(20), "Rate limit exceeded: 20 per 1 second", "1"},
		{ratelimit.PerMinute(1), "Rate limit exceeded: 1 per 1 minute", "60"},
		{ratelimit.Every(1, 10*time.Second), "Rate limit exceeded: 1 per 10 second", "10"},
	}
	cfg := ratelimittest.Config(t)
	l, reg := newLimiter(t, cfg)
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.lim.String(), func(t *testing.T) {
			if got := "Rate limit exceeded: " + tt.lim.String(); got != tt.text {
				t.Fatalf("429 text %q, want %q", got, tt.text)
			}
			key := "company-42:" + tt.lim.String()
			emission := tt.lim.Period / time.Duration(tt.lim.Rate)
			start := time.Now()
			for i := range tt.lim.Burst {
				res := l.Allow(ctx, key, tt.lim)
				if !res.Allowed || res.Local || res.Remaining != tt.lim.Burst-1-i || res.RetryAfter != 0 {
					t.Fatalf("request %d: %+v, want allowed from Redis with %d remaining", i, res, tt.lim.Burst-1-i)
				}
				if res.ResetAfter <= 0 || res.ResetAfter > emission*time.Duration(i+1) {
					t.Fatalf("request %d: reset after %s, want (0, %s]", i, res.ResetAfter, emission*time.Duration(i+1))
				}
			}
			res := l.Allow(ctx, key, tt.lim)
			if res.Allowed || res.Local || res.Remaining != 0 {
				t.Fatalf("over the limit: %+v, want refused by Redis", res)
			}
			// Only the time since the burst started has been paid back.
			paid := time.Since(start) + 5*time.Millisecond
			if res.RetryAfter < emission-paid || res.RetryAfter > emission {
				t.Fatalf("retry after %s, want %s less at most %s", res.RetryAfter, emission, paid)
			}
			if res.ResetAfter < tt.lim.Period-paid || res.ResetAfter > tt.lim.Period {
				t.Fatalf("reset after %s, want %s less at most %s", res.ResetAfter, tt.lim.Period, paid)
			}
			h := http.Header{}
			res.SetHeaders(h)
			want := map[string]string{
				"Retry-After":           tt.retryHeader,
				"X-RateLimit-Limit":     strconv.Itoa(tt.lim.Burst),
				"X-RateLimit-Remaining": "0",
				"X-RateLimit-Reset":     strconv.Itoa(int(tt.lim.Period / time.Second)),
			}
			for k, v := range want {
				if got := h.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if other := l.Allow(ctx, "company-43:"+tt.lim.String(), tt.lim); !other.Allowed {
				t.Fatalf("another company was refused: %+v", other)
			}
		})
	}
	if n := metric(t, reg, "parley_ratelimit_fallback_total", ""); n != 0 {
		t.Fatalf("%v fallbacks with Redis up", n)
	}
}

func TestAllowRefillsAfterRetryAfter(t *testing.T) {
	l, _ := newLimiter(t, ratelimittest.Config(t))
	ctx := context.Background()
	lim := ratelimit.PerSecond(10)
	for range 10 {
		l.Allow(ctx, "k", lim)
	}
	res := l.Allow(ctx, "k", lim)
	if res.Allowed {
		t.Fatalf("11th request allowed: %+v", res)
	}
	time.Sleep(res.RetryAfter + 5*time.Millisecond)
	if res := l.Allow(ctx, "k", lim); !res.Allowed || res.Remaining != 0 {
		t.Fatalf("after Retry-After: %+v, want one allowed", res)
	}
	if res := l.Allow(ctx, "k", lim); res.Allowed {
		t.Fatalf("second request after Retry-After allowed: %+v", res)
	}
}

func TestKeysLiveUnderThePrefix(t *testing.T) {
	cfg := ratelimittest.Config(t)
	l, _ := newLimiter(t, cfg)
	ctx := context.Background()
	l.Allow(ctx, "company-1:/api/campaigns/send", ratelimit.PerSecond(10))
	if n, _ := l.Take(ctx, "account-7", 80, 1); n != 1 {
		t.Fatalf("Take granted %d, want 1", n)
	}

	rdb := redis.NewClient(&redis.Options{Addr: cfg.Addr})
	defer rdb.Close()
	keys, err := rdb.Keys(ctx, cfg.KeyPrefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		cfg.KeyPrefix + "rate:req:company-1:/api/campaigns/send": true,
		cfg.KeyPrefix + "rate:tp:account-7":                      true,
	}
	if len(keys) != len(want) {
		t.Fatalf("keys under the prefix: %v, want %v", keys, want)
	}
	for _, k := range keys {
		if !want[k] {
			t.Fatalf("unexpected key %q", k)
		}
	}

	// Another prefix (another environment or test) has state of its own.
	other, _ := newLimiter(t, ratelimittest.Config(t))
	lim := ratelimit.PerMinute(1)
	if !l.Allow(ctx, "same", lim).Allowed || !other.Allow(ctx, "same", lim).Allowed {
		t.Fatal("the first request under each prefix must be allowed")
	}
}

func TestAllowInvalidLimitRefuses(t *testing.T) {
	l, _ := newLimiter(t, ratelimittest.Config(t))
	if res := l.Allow(context.Background(), "k", ratelimit.Limit{}); res.Allowed {
		t.Fatalf("zero limit allowed a request: %+v", res)
	}
}
