package ratelimit

import (
	"strconv"
	"testing"
	"time"
)

// fakeClock is a monotonic clock tests move by hand.
type fakeClock struct{ t time.Duration }

func (c *fakeClock) now() time.Duration { return c.t }

func TestLocalAllowN(t *testing.T) {
	tests := []struct {
		lim Limit
	}{
		{PerSecond(10)}, {PerSecond(20)}, {PerMinute(1)}, {Every(1, 10*time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.lim.String(), func(t *testing.T) {
			clk := &fakeClock{t: time.Hour}
			g := newLocalGCRA(clk.now)
			emission := tt.lim.Period / time.Duration(tt.lim.Rate)
			for i := range tt.lim.Burst {
				out := g.allowN("k", tt.lim, 1)
				if out.allowed != 1 || out.remaining != tt.lim.Burst-1-i {
					t.Fatalf("call %d: %+v, want allowed with %d remaining", i, out, tt.lim.Burst-1-i)
				}
				if want := emission * time.Duration(i+1); out.resetAfter != want {
					t.Fatalf("call %d: reset after %s, want %s", i, out.resetAfter, want)
				}
			}
			out := g.allowN("k", tt.lim, 1)
			if out.allowed != 0 || out.retryAfter != emission || out.resetAfter != tt.lim.Period {
				t.Fatalf("over the burst: %+v, want denied, retry %s, reset %s", out, emission, tt.lim.Period)
			}
			if other := g.allowN("other", tt.lim, 1); other.allowed != 1 {
				t.Fatalf("another key was refused: %+v", other)
			}
			clk.t += emission - 1
			if out := g.allowN("k", tt.lim, 1); out.allowed != 0 || out.retryAfter != 1 {
				t.Fatalf("1ns early: %+v", out)
			}
			clk.t++
			if out := g.allowN("k", tt.lim, 1); out.allowed != 1 || out.remaining != 0 {
				t.Fatalf("after one emission interval: %+v, want one allowed", out)
			}
			clk.t += tt.lim.Period
			if out := g.allowN("k", tt.lim, 1); out.allowed != 1 || out.remaining != tt.lim.Burst-1 {
				t.Fatalf("after a full period: %+v, want a full burst back", out)
			}
		})
	}
}

func TestLocalAllowAtMostGrantsWholePermits(t *testing.T) {
	clk := &fakeClock{t: time.Hour}
	g := newLocalGCRA(clk.now)
	lim := Limit{Rate: 10, Burst: 4, Period: time.Second} // one permit per 100ms

	if out := g.allowAtMost("k", lim, 10); out.allowed != 4 || out.remaining != 0 {
		t.Fatalf("fresh key: %+v, want the burst of 4", out)
	}
	if out := g.allowAtMost("k", lim, 10); out.allowed != 0 || out.retryAfter != 100*time.Millisecond {
		t.Fatalf("empty: %+v, want none and retry in 100ms", out)
	}
	clk.t += 150 * time.Millisecond // 1.5 permits
	if out := g.allowAtMost("k", lim, 10); out.allowed != 1 {
		t.Fatalf("after 1.5 permits: %+v, want 1", out)
	}
	// The half permit was not charged: it completes 50ms later.
	if out := g.allowAtMost("k", lim, 10); out.allowed != 0 || out.retryAfter != 50*time.Millisecond {
		t.Fatalf("after taking 1 of 1.5: %+v, want retry in 50ms", out)
	}
	clk.t += 50 * time.Millisecond
	if out := g.allowAtMost("k", lim, 3); out.allowed != 1 {
		t.Fatalf("after the half permit completed: %+v, want 1", out)
	}
	clk.t += time.Second
	if out := g.allowAtMost("k", lim, 3); out.allowed != 3 || out.remaining != 1 {
		t.Fatalf("want 3 of 4 with 1 remaining, got %+v", out)
	}
}

func TestLocalRateOverTime(t *testing.T) {
	// Asking every millisecond for 10s at 80/s with a burst of 8 grants the
	// burst at once, then one permit every 12.5ms up to 9.999s: 799.
	clk := &fakeClock{}
	g := newLocalGCRA(clk.now)
	lim := Limit{Rate: 80, Burst: 8, Period: time.Second}
	total := 0
	for range 10_000 {
		out := g.allowAtMost("acct", lim, 5)
		total += out.allowed
		clk.t += time.Millisecond
	}
	if total != 8+799 {
		t.Fatalf("granted %d in 10s, want %d", total, 8+799)
	}
}

func TestLocalMemoryIsBounded(t *testing.T) {
	clk := &fakeClock{}
	g := newLocalGCRA(clk.now)
	lim := PerSecond(1)

	// Idle keys are swept: 200k keys, each idle after a second (so about
	// 1000 active at a time, 16 a shard), never pile up.
	for i := range 200_000 {
		g.allowN(strconv.Itoa(i), lim, 1)
		clk.t += time.Millisecond
	}
	if n := g.len(); n > localShards*localMinSweep {
		t.Fatalf("%d keys held with about 1000 active", n)
	}

	// Keys all active at once are capped.
	for i := range 2 * localMaxKeys {
		g.allowN("active"+strconv.Itoa(i), PerHour(1), 1)
	}
	if n := g.len(); n > localMaxKeys {
		t.Fatalf("%d keys held, cap is %d", n, localMaxKeys)
	}
}
