package whatsappsim

import (
	"sort"
	"sync"
)

// bucket is a phone number's throughput: a token bucket refilled at rate
// per second holding at most one second's worth, so that a sender pacing
// itself at the rate never sees 130429 and a burst past it does.
type bucket struct {
	mu     sync.Mutex
	rate   float64 // tokens per nanosecond
	burst  float64
	tokens float64
	last   int64 // unix nanoseconds of the last refill
}

func newBucket(perSecond int) *bucket {
	b := &bucket{rate: float64(perSecond) / 1e9, burst: float64(max(perSecond, 1))}
	b.tokens = b.burst
	return b
}

func (b *bucket) take(now int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last != 0 && now > b.last {
		b.tokens = min(b.burst, b.tokens+float64(now-b.last)*b.rate)
	}
	if now > b.last {
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

func (b *bucket) refill() {
	b.mu.Lock()
	b.tokens, b.last = b.burst, 0
	b.mu.Unlock()
}

// pairLimiter remembers when each (number, recipient) pair last got a
// message, for 131056. It holds at most capacity pairs: when full it first
// forgets pairs older than the interval; pairs it still cannot hold are not
// limited (and counted as untracked in the statistics).
type pairLimiter struct {
	mu        sync.Mutex
	last      map[string]int64
	capacity  int
	lastSweep int64
}

func newPairLimiter(capacity int) *pairLimiter {
	return &pairLimiter{last: map[string]int64{}, capacity: capacity}
}

func (p *pairLimiter) allow(key string, now, interval int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.last[key]
	if ok && now-t < interval {
		return false
	}
	if !ok && len(p.last) >= p.capacity {
		// Sweep at most every interval: a map full of fresh pairs must not
		// cost a full scan on every send.
		if now-p.lastSweep >= interval {
			p.lastSweep = now
			for k, v := range p.last {
				if now-v >= interval {
					delete(p.last, k)
				}
			}
		}
		if len(p.last) >= p.capacity {
			return true
		}
	}
	p.last[key] = now
	return true
}

func (p *pairLimiter) reset() {
	p.mu.Lock()
	p.last = map[string]int64{}
	p.lastSweep = 0
	p.mu.Unlock()
}

func sortAccounts(a []Account) {
	sort.Slice(a, func(i, j int) bool { return a[i].PhoneNumberID < a[j].PhoneNumberID })
}
