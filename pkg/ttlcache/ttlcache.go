// Package ttlcache is the read-through cache of records needed on every
// request or send (the gateway's keys, campaigns and automations; the
// dispatchers' accounts, templates and tokens): entries live for a short TTL,
// concurrent misses share one load, an expired entry may still serve while
// the database cannot be reached, and entries can be dropped at once when a
// change is broadcast.
package ttlcache

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// Config tunes a cache.
type Config struct {
	TTL time.Duration
	// StaleIfError is how long past its TTL an entry may serve while loading fails.
	StaleIfError time.Duration
	// LoadTimeout bounds one load, whatever the requests waiting on it.
	LoadTimeout time.Duration
	// MaxEntries bounds memory: when full, expired entries are swept, then
	// arbitrary ones dropped. Zero means 100,000.
	MaxEntries int
}

// Entry is a cached value and when it was loaded.
type Entry[V any] struct {
	Value    V
	LoadedAt time.Time
}

// Cache maps K to V.
type Cache[K comparable, V any] struct {
	cfg  Config
	now  func() time.Time
	load func(ctx context.Context, k K) (V, error)
	key  func(K) string

	mu      sync.RWMutex
	entries map[K]*Entry[V]
	sf      singleflight.Group
}

// New returns a cache that loads misses with load. now is the clock.
func New[K comparable, V any](cfg Config, now func() time.Time, load func(context.Context, K) (V, error)) *Cache[K, V] {
	if now == nil {
		now = time.Now
	}
	if cfg.LoadTimeout == 0 {
		cfg.LoadTimeout = 2 * time.Second
	}
	if cfg.MaxEntries == 0 {
		cfg.MaxEntries = 100_000
	}
	return &Cache[K, V]{cfg: cfg, now: now, load: load, entries: map[K]*Entry[V]{},
		key: func(k K) string { return fmt.Sprint(k) }}
}

// Get returns the cached entry for k, loading it when absent or expired.
// stale reports that the entry is past its TTL and served because loading failed.
func (c *Cache[K, V]) Get(ctx context.Context, k K) (e *Entry[V], stale bool, err error) {
	now := c.now()
	c.mu.RLock()
	e = c.entries[k]
	c.mu.RUnlock()
	if e != nil && now.Sub(e.LoadedAt) < c.cfg.TTL {
		return e, false, nil
	}
	v, err, _ := c.sf.Do(c.key(k), func() (any, error) {
		// One caller's cancellation must not fail every waiter of this load.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.LoadTimeout)
		defer cancel()
		val, err := c.load(lctx, k)
		if err != nil {
			return nil, err
		}
		fresh := &Entry[V]{Value: val, LoadedAt: c.now()}
		c.mu.Lock()
		if _, ok := c.entries[k]; !ok && len(c.entries) >= c.cfg.MaxEntries {
			c.makeRoom(fresh.LoadedAt)
		}
		c.entries[k] = fresh
		c.mu.Unlock()
		return fresh, nil
	})
	if err != nil {
		if e != nil && now.Sub(e.LoadedAt) < c.cfg.TTL+c.cfg.StaleIfError {
			return e, true, nil
		}
		return nil, false, err
	}
	return v.(*Entry[V]), false, nil
}

// makeRoom frees at least one slot; the caller holds mu.
func (c *Cache[K, V]) makeRoom(now time.Time) {
	for k, e := range c.entries {
		if now.Sub(e.LoadedAt) >= c.cfg.TTL+c.cfg.StaleIfError {
			delete(c.entries, k)
		}
	}
	for k := range c.entries {
		if len(c.entries) < c.cfg.MaxEntries {
			return
		}
		delete(c.entries, k) // map order is random: an arbitrary victim
	}
}

// Delete drops k.
func (c *Cache[K, V]) Delete(k K) {
	c.mu.Lock()
	delete(c.entries, k)
	c.mu.Unlock()
}

// DeleteFunc drops every entry for which drop is true.
func (c *Cache[K, V]) DeleteFunc(drop func(K, V) bool) {
	c.mu.Lock()
	for k, e := range c.entries {
		if drop(k, e.Value) {
			delete(c.entries, k)
		}
	}
	c.mu.Unlock()
}

// Len is the number of entries (for metrics and tests).
func (c *Cache[K, V]) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries)
}
