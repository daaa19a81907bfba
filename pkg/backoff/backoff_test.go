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
