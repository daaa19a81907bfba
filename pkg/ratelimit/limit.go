package ratelimit

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// Limit is a GCRA limit: Rate events per Period, of which up to Burst may
// happen at once. Its fields match redis_rate.Limit, so one converts to the
// other with redis_rate.Limit(l).
type Limit struct {
	Rate   int
	Burst  int
	Period time.Duration
}

// PerSecond allows n requests per second, all n at once if they come together.
func PerSecond(n int) Limit { return Every(n, time.Second) }

// PerMinute allows n requests per minute, all n at once if they come together.
func PerMinute(n int) Limit { return Every(n, time.Minute) }

// PerHour allows n requests per hour, all n at once if they come together.
func PerHour(n int) Limit { return Every(n, time.Hour) }

// Every allows n requests per period d ("1 request every 10 seconds" is
// Every(1, 10*time.Second)), all n at once if they come together.
func Every(n int, d time.Duration) Limit { return Limit{Rate: n, Burst: n, Period: d} }

// Validate reports whether the limit can be enforced: a limit with a zero
// rate, burst or period would divide by zero in the GCRA arithmetic.
func (l Limit) Validate() error {
	var errs []error
	if l.Rate <= 0 {
		errs = append(errs, fmt.Errorf("rate %d is not positive", l.Rate))
	}
	if l.Burst <= 0 {
		errs = append(errs, fmt.Errorf("burst %d is not positive", l.Burst))
	}
	if l.Period <= 0 {
		errs = append(errs, fmt.Errorf("period %s is not positive", l.Period))
	} else if l.Rate > 0 && l.Period/time.Duration(l.Rate) == 0 {
		errs = append(errs, fmt.Errorf("period %s is too short for rate %d", l.Period, l.Rate))
	}
	return errors.Join(errs...)
}

// String is the limit as the 429 body states it, "<n> per <m> <unit>":
// "10 per 1 second", "1 per 1 minute", "1 per 10 second". The unit is the
// largest of day, hour, minute, second and millisecond that divides the
// period; the unit word stays singular, as the API has always written it.
func (l Limit) String() string {
	units := []struct {
		d    time.Duration
		name string
	}{
		{24 * time.Hour, "day"},
		{time.Hour, "hour"},
		{time.Minute, "minute"},
		{time.Second, "second"},
		{time.Millisecond, "millisecond"},
	}
	for _, u := range units {
		if l.Period >= u.d && l.Period%u.d == 0 {
			return fmt.Sprintf("%d per %d %s", l.Rate, l.Period/u.d, u.name)
		}
	}
	return fmt.Sprintf("%d per %s", l.Rate, l.Period)
}

// Result is the answer to one Allow.
type Result struct {
	// Allowed reports whether the request may proceed.
	Allowed bool
	// Limit is the limit the request was checked against.
	Limit Limit
	// Remaining is how many more requests would be allowed right now.
	Remaining int
	// RetryAfter is how long until a request would be allowed again; zero
	// when this one was allowed.
	RetryAfter time.Duration
	// ResetAfter is how long until the key is back to its full burst, with
	// nothing left to pay back.
	ResetAfter time.Duration
	// Local reports that the answer came from the per-process fallback
	// because Redis was unavailable: the limit then holds per replica.
	Local bool
}

// Header names set by SetHeaders.
const (
	HeaderRetryAfter = "Retry-After"
	HeaderLimit      = "X-RateLimit-Limit"
	HeaderRemaining  = "X-RateLimit-Remaining"
	HeaderReset      = "X-RateLimit-Reset"
)

// SetHeaders writes the rate-limit headers the gateway sends with every
// limited response:
//
//   - X-RateLimit-Limit: the burst, the most requests allowed at once (equal to
//     the rate for every limit built by PerSecond, PerMinute and Every).
//   - X-RateLimit-Remaining: requests allowed right now.
//   - X-RateLimit-Reset: whole seconds, rounded up, until the key is back to
//     its full burst; a delta, not a Unix time, so clients need no clock sync.
//   - Retry-After (only when denied): whole seconds, rounded up and at least 1,
//     until a request would be allowed; rounding up means a client that waits
//     exactly that long is not refused again.
func (r Result) SetHeaders(h http.Header) {
	h.Set(HeaderLimit, strconv.Itoa(r.Limit.Burst))
	h.Set(HeaderRemaining, strconv.Itoa(r.Remaining))
	h.Set(HeaderReset, strconv.Itoa(ceilSeconds(r.ResetAfter)))
	if !r.Allowed {
		h.Set(HeaderRetryAfter, strconv.Itoa(max(1, ceilSeconds(r.RetryAfter))))
	}
}

// ceilSeconds rounds d up to whole seconds; negative durations count as zero.
// Sub-millisecond parts are dropped first: the Lua script computes in floating
// point, and 1.0000000001s of noise must read 1, not 2.
func ceilSeconds(d time.Duration) int {
	d = d.Truncate(time.Millisecond)
	if d <= 0 {
		return 0
	}
	return int(math.Ceil(d.Seconds()))
}
