// Package backoff is the wait before a retry: one policy, exponential from
// a base and capped, with or without jitter.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Exponential is the wait before retry number attempt (1 after the first
// failure): base, doubled per attempt, capped at limit. The dispatchers
// give back a batch they could not expand after it (1 s doubling to 30 s);
// retries that a burst of failures shares use Jittered.
func Exponential(base, limit time.Duration, attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	if attempt-1 < 40 {
		if exp := base << (attempt - 1); exp > 0 && exp < limit {
			return exp
		}
	}
	return limit
}

// Jittered is Exponential with full jitter (uniform in [0, Exponential]) so
// that a burst of failures does not come back as a burst.
func Jittered(base, limit time.Duration, attempt int) time.Duration {
	return rand.N(Exponential(base, limit, attempt) + 1)
}
