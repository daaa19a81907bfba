package ratelimit

import (
	"errors"
	"testing"
	"time"
)

func TestBreaker(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var opened, stillOpen, closed int
	var lastPause time.Duration
	b := &breaker{
		now:         func() time.Time { return now },
		onOpen:      func(_ error, p time.Duration) { opened++; lastPause = p },
		onStillOpen: func(_ error, p, _ time.Duration) { stillOpen++; lastPause = p },
		onClose:     func(time.Duration) { closed++ },
	}
	boom := errors.New("boom")

	// Failures below the threshold, or broken by a success, keep it closed.
	for range breakerThreshold - 1 {
		b.failure(false, boom)
	}
	b.success(false)
	for range breakerThreshold - 1 {
		b.failure(false, boom)
	}
	if use, _ := b.allow(); !use || b.degraded() {
		t.Fatal("opened before the threshold of consecutive failures")
	}

	b.failure(false, boom)
	if use, _ := b.allow(); use || !b.degraded() || opened != 1 || lastPause != breakerFirstPause {
		t.Fatalf("after %d failures: use=%v degraded=%v opened=%d pause=%s", breakerThreshold, use, b.degraded(), opened, lastPause)
	}
	// More failures from calls already in flight do not reopen it.
	b.failure(false, boom)
	if opened != 1 {
		t.Fatal("opened twice")
	}

	// Each failed probe doubles the pause, up to the maximum.
	want := breakerFirstPause
	for range 10 {
		now = now.Add(want - time.Nanosecond)
		if use, _ := b.allow(); use {
			t.Fatalf("probed before the pause of %s ended", want)
		}
		now = now.Add(time.Nanosecond)
		use, probe := b.allow()
		if !use || !probe {
			t.Fatalf("no probe after the pause of %s", want)
		}
		if use, _ := b.allow(); use {
			t.Fatal("a second call probed alongside the first")
		}
		b.failure(true, boom)
		want = min(2*want, breakerMaxPause)
		if lastPause != want {
			t.Fatalf("pause after a failed probe %s, want %s", lastPause, want)
		}
	}
	if stillOpen != 10 {
		t.Fatalf("%d failed probes reported, want 10", stillOpen)
	}

	// A probe whose caller gave up hands the probe to the next call.
	now = now.Add(want)
	if _, probe := b.allow(); !probe {
		t.Fatal("no probe")
	}
	b.abort(true)
	if _, probe := b.allow(); !probe {
		t.Fatal("the probe was not handed on after abort")
	}

	// A successful probe closes it and resets the pause.
	b.success(true)
	if use, _ := b.allow(); !use || b.degraded() || closed != 1 {
		t.Fatalf("after a good probe: use=%v degraded=%v closed=%d", use, b.degraded(), closed)
	}
	for range breakerThreshold {
		b.failure(false, boom)
	}
	if lastPause != breakerFirstPause {
		t.Fatalf("pause on reopening %s, want %s", lastPause, breakerFirstPause)
	}
}
