// Package batcher queues items and writes them in batches: a batch is
// written once it holds Size items or Interval after its first one, by one
// of several flushers sharing the queue (so that the writing is not one
// database backend's work at a time). A failed write is retried, with
// everything that arrived meanwhile, after a growing pause (up to 2s) until
// it succeeds; once the queue is closed, for at most GiveUp.
package batcher

import (
	"sync"
	"time"
)

// Config sizes a Batcher.
type Config struct {
	// Size is how many items make a batch written at once.
	Size int
	// Interval is how long the first item of a batch waits for more.
	Interval time.Duration
	// Flushers is how many batches may be written at once (at least 1).
	Flushers int
	// Queue is how many items Add takes before it blocks.
	Queue int
	// GiveUp bounds the retries of a failing write once Close is called.
	GiveUp time.Duration
}

// Hooks are what a Batcher does with a batch; only Write is required.
type Hooks[T any] struct {
	// Write records a batch, all or nothing.
	Write func(batch []T) error
	// Failed is told of each failed write: the items waiting and how many
	// writes in a row have failed.
	Failed func(pending, failures int, err error)
	// Recovered is told when a write succeeds after failures.
	Recovered func(failures int)
	// GaveUp is told of the items dropped when GiveUp has passed after Close.
	GaveUp func(pending int)
}

// Batcher is a queue of items written in batches.
type Batcher[T any] struct {
	cfg   Config
	hooks Hooks[T]
	in    chan T
	done  chan struct{}
}

// New returns a Batcher; Start starts its flushers.
func New[T any](cfg Config, hooks Hooks[T]) *Batcher[T] {
	cfg.Flushers = max(cfg.Flushers, 1)
	cfg.Size = max(cfg.Size, 1)
	return &Batcher[T]{cfg: cfg, hooks: hooks, in: make(chan T, cfg.Queue), done: make(chan struct{})}
}

// Add queues an item; it blocks while the queue is full.
func (b *Batcher[T]) Add(v T) { b.in <- v }

// Close writes what is queued and stops; call it once no Add can happen.
func (b *Batcher[T]) Close() {
	close(b.in)
	<-b.done
}

// Start starts the flushers and returns.
func (b *Batcher[T]) Start() {
	var wg sync.WaitGroup
	for range b.cfg.Flushers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.flusher()
		}()
	}
	go func() {
		wg.Wait()
		close(b.done)
	}()
}

func (b *Batcher[T]) flusher() {
	var buf []T
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	armed := false
	// Since Go 1.23 Reset discards a pending fire, so no draining is needed.
	arm := func(d time.Duration) {
		timer.Reset(d)
		armed = true
	}
	failures := 0
	closed := false
	var deadline time.Time
	flush := func() {
		if len(buf) == 0 {
			return
		}
		if err := b.hooks.Write(buf); err != nil {
			failures++
			if b.hooks.Failed != nil {
				b.hooks.Failed(len(buf), failures, err)
			}
			arm(min(time.Duration(failures)*100*time.Millisecond, 2*time.Second))
			return
		}
		if failures > 0 && b.hooks.Recovered != nil {
			b.hooks.Recovered(failures)
		}
		failures = 0
		buf = buf[:0]
		armed = false
	}
	for {
		if closed {
			if len(buf) == 0 {
				return
			}
			if time.Now().After(deadline) {
				if b.hooks.GaveUp != nil {
					b.hooks.GaveUp(len(buf))
				}
				return
			}
		}
		in := b.in
		if closed {
			in = nil
		}
		select {
		case v, ok := <-in:
			if !ok {
				closed = true
				deadline = time.Now().Add(b.cfg.GiveUp)
				if failures == 0 {
					flush()
				}
				continue
			}
			buf = append(buf, v)
			if failures > 0 {
				continue
			}
			if len(buf) >= b.cfg.Size {
				flush()
			} else if !armed {
				arm(b.cfg.Interval)
			}
		case <-timer.C:
			armed = false
			flush()
		}
	}
}
