package ratelimit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/testkit/ratelimittest"
)

func newPacer(t *testing.T) *ratelimit.Pacer {
	t.Helper()
	cfg := ratelimittest.Config(t)
	rdb := ratelimit.NewRedisClient(cfg)
	t.Cleanup(func() { _ = rdb.Close() })
	return ratelimit.NewPacer(rdb, cfg)
}

// TestPairReservesEachUserOnceAnInterval: a user free now is reserved, the
// same user again (in the same call or the next) waits for what is left
// of the interval, another number or user is free.
func TestPairReservesEachUserOnceAnInterval(t *testing.T) {
	p := newPacer(t)
	ctx := context.Background()
	waits, err := p.Pair(ctx, 1, "100", []string{"+1555", "+1666", "+1555"}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if waits[0] != 0 || waits[1] != 0 || waits[2] <= time.Second || waits[2] > 2*time.Second {
		t.Fatalf("waits %v: want 0, 0 and about 2s", waits)
	}
	waits, err = p.Pair(ctx, 1, "100", []string{"+1555"}, 2*time.Second)
	if err != nil || waits[0] <= 0 {
		t.Fatalf("again: %v, %v; want a wait", waits, err)
	}
	waits, err = p.Pair(ctx, 1, "200", []string{"+1555"}, 2*time.Second)
	if err != nil || waits[0] != 0 {
		t.Fatalf("another number: %v, %v; want free", waits, err)
	}
}

// TestReachCountsUniqueUsersInTheWindow: a portfolio with a limit of 3
// takes 3 new users, again any of them for free, and refuses a fourth
// until the oldest reach leaves the window, which it says; the window
// moving frees room.
func TestReachCountsUniqueUsersInTheWindow(t *testing.T) {
	p := newPacer(t)
	ctx := context.Background()
	t0 := time.Now()
	const window = time.Minute
	reach := func(at time.Time, users ...string) []time.Time {
		t.Helper()
		out, err := p.Reach(ctx, 7, "900", users, 3, window, at)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	got := reach(t0, "a", "b")
	got = append(got, reach(t0.Add(time.Second), "c", "a", "d", "e")...)
	want := []string{"0", "0", "0", "0", fmt.Sprint(t0.Add(window).UnixMilli()), fmt.Sprint(t0.Add(time.Second + window).UnixMilli())}
	for i, g := range got {
		s := "0"
		if !g.IsZero() {
			s = fmt.Sprint(g.UnixMilli())
		}
		if s != want[i] {
			t.Fatalf("reach %d = %s, want %s (all: %v)", i, s, want[i], got)
		}
	}
	if n, err := p.Reached(ctx, 7, "900", window, t0.Add(2*time.Second)); err != nil || n != 3 {
		t.Fatalf("reached %d, %v; want 3", n, err)
	}
	// "a" was reached again at t0+1s: b (t0) leaves first, then room for one.
	if r := reach(t0.Add(window+10*time.Millisecond), "d"); !r[0].IsZero() {
		t.Fatalf("after b left the window: %v, want room", r)
	}
	if r := reach(t0.Add(window+20*time.Millisecond), "e"); r[0].IsZero() {
		t.Fatalf("a fourth user while a, c, d are in the window was admitted")
	}
}

// TestMarketingPauseIsShared: a pause is read back until it ends.
func TestMarketingPauseIsShared(t *testing.T) {
	p := newPacer(t)
	ctx := context.Background()
	if left, err := p.MarketingPausedFor(ctx, 3, "100"); err != nil || left != 0 {
		t.Fatalf("no pause: %v, %v", left, err)
	}
	if err := p.PauseMarketing(ctx, 3, "100", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := p.PauseMarketing(ctx, 3, "100", time.Second); err != nil { // a shorter one keeps the longer
		t.Fatal(err)
	}
	if left, err := p.MarketingPausedFor(ctx, 3, "100"); err != nil || left < 59*time.Second || left > time.Minute {
		t.Fatalf("paused for %v, %v; want about a minute", left, err)
	}
}
