// Package backoff is the wait before a retry.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Jittered is the wait before retry number attempt (1 after the first
// failure): exponential from base, capped, with full jitter (uniform in
// [0, min(limit, base*2^(attempt-1))]) so that a burst of failures does not
// come back as a burst.
func Jittered(base, limit time.Duration, attempt int) time.Duration {
	d := limit
	if attempt < 1 {
		attempt = 1
	}
	if attempt-1 < 40 {
		if exp := base << (attempt - 1); exp > 0 && exp < limit {
			d = exp
		}
	}
	return rand.N(d + 1)
}
