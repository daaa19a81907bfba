package ratelimit

import (
	"sync"
	"sync/atomic"
	"time"
)

// Breaker settings. A down Redis refuses connections at once, so probing
// often is cheap; a stalled one costs the probing request one timeout, so
// the interval grows while the outage lasts.
const (
	breakerThreshold   = 3 // consecutive failures that open the breaker
	breakerFirstPause  = 100 * time.Millisecond
	breakerMaxPause    = 2 * time.Second
	breakerLogInterval = 30 * time.Second
)

type breakerState int32

const (
	breakerClosed  breakerState = iota // Redis answers
	breakerOpen                        // skip Redis until the pause ends
	breakerProbing                     // one call is trying Redis
)

// breaker keeps requests off a Redis that is failing, so that they do not
// each pay the timeout: after breakerThreshold consecutive failures it opens
// for a pause, then lets one call probe; a failed probe doubles the pause
// (up to breakerMaxPause), a successful one closes it. The closed fast path
// is two atomic loads.
type breaker struct {
	state    atomic.Int32
	failures atomic.Int32
	now      func() time.Time

	mu        sync.Mutex
	pause     time.Duration
	openUntil time.Time
	openedAt  time.Time

	// onOpen, onStillOpen and onClose report transitions (logs, gauge);
	// they run under mu, at most once per transition or failed probe.
	onOpen      func(err error, pause time.Duration)
	onStillOpen func(err error, pause time.Duration, downFor time.Duration)
	onClose     func(downFor time.Duration)
}

// allow reports whether this call should use Redis, and whether it is the
// probe of an open breaker (which must then report its outcome).
func (b *breaker) allow() (useRedis, probe bool) {
	switch breakerState(b.state.Load()) {
	case breakerClosed:
		return true, false
	case breakerProbing:
		return false, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if breakerState(b.state.Load()) != breakerOpen || b.now().Before(b.openUntil) {
		return false, false
	}
	b.state.Store(int32(breakerProbing))
	return true, true
}

// success records a call Redis answered.
func (b *breaker) success(probe bool) {
	if !probe {
		if b.failures.Load() != 0 {
			b.failures.Store(0)
		}
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures.Store(0)
	b.pause = 0
	b.state.Store(int32(breakerClosed))
	if b.onClose != nil {
		b.onClose(b.now().Sub(b.openedAt))
	}
}

// failure records a call Redis failed (error or timeout).
func (b *breaker) failure(probe bool, err error) {
	if !probe {
		if b.failures.Add(1) < breakerThreshold || breakerState(b.state.Load()) != breakerClosed {
			return
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if probe {
		b.pause = min(2*b.pause, breakerMaxPause)
		b.openUntil = now.Add(b.pause)
		b.state.Store(int32(breakerOpen))
		if b.onStillOpen != nil {
			b.onStillOpen(err, b.pause, now.Sub(b.openedAt))
		}
		return
	}
	if breakerState(b.state.Load()) != breakerClosed {
		return // another failing call opened it first
	}
	b.pause = breakerFirstPause
	b.openUntil = now.Add(b.pause)
	b.openedAt = now
	b.state.Store(int32(breakerOpen))
	if b.onOpen != nil {
		b.onOpen(err, b.pause)
	}
}

// abort hands back a probe that learnt nothing (its caller gave up), so
// that the next call probes instead.
func (b *breaker) abort(probe bool) {
	if !probe {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.state.Store(int32(breakerOpen))
}

// degraded reports whether the breaker is not closed.
func (b *breaker) degraded() bool { return breakerState(b.state.Load()) != breakerClosed }
