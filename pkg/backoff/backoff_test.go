package backoff_test

import (
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/backoff"
)

// TestJittered: the wait stays within the exponential bound of its attempt
// and never passes the limit, however many attempts.
func TestJittered(t *testing.T) {
	base, limit := time.Second, time.Minute
	for attempt, bound := range map[int]time.Duration{0: time.Second, 1: time.Second, 2: 2 * time.Second, 4: 8 * time.Second, 7: time.Minute, 500: time.Minute} {
		for range 200 {
			if d := backoff.Jittered(base, limit, attempt); d < 0 || d > bound {
				t.Fatalf("attempt %d: %v, want within [0, %v]", attempt, d, bound)
			}
		}
	}
}

// TestExponential: base doubled per attempt up to the limit, and the limit
// however many attempts (no overflow past 2^40).
func TestExponential(t *testing.T) {
	for attempt, want := range map[int]time.Duration{0: time.Second, 1: time.Second, 2: 2 * time.Second, 5: 16 * time.Second,
		6: 30 * time.Second, 63: 30 * time.Second, 500: 30 * time.Second} {
		if got := backoff.Exponential(time.Second, 30*time.Second, attempt); got != want {
			t.Errorf("attempt %d: %v, want %v", attempt, got, want)
		}
	}
}
