package ratelimit

import (
	"hash/maphash"
	"sync"
	"time"
)

// outcome is one GCRA decision, from Redis or from the local store.
type outcome struct {
	allowed    int
	remaining  int
	retryAfter time.Duration // zero when something was allowed
	resetAfter time.Duration
}

const (
	localShards = 64
	// localMaxKeys bounds the fallback's memory (about 100 bytes a key). A
	// gateway has companies x routes keys; far fewer are active at once.
	localMaxKeys  = 1 << 16
	localMinSweep = 64
)

// localGCRA is the per-process fallback: the same GCRA arithmetic as
// redis_rate's Lua scripts, on the process's monotonic clock, so that a
// limit behaves the same whichever side answers.
//
// Memory stays bounded: a key whose theoretical arrival time (TAT) has
// passed is in the same state as a key never seen, so sweeping it loses
// nothing. A shard sweeps such keys whenever it has doubled since its last
// sweep, and if it is still full (localMaxKeys/localShards keys inside
// their window) it drops a quarter of them at random: such a key starts
// again with a fresh burst, which can only allow more, never refuse wrongly.
type localGCRA struct {
	seed   maphash.Seed
	now    func() time.Duration // monotonic time since an arbitrary start
	shards [localShards]localShard
}

type localShard struct {
	mu      sync.Mutex
	tat     map[string]time.Duration
	sweepAt int
}

func newLocalGCRA(now func() time.Duration) *localGCRA {
	if now == nil {
		start := time.Now()
		now = func() time.Duration { return time.Since(start) }
	}
	g := &localGCRA{seed: maphash.MakeSeed(), now: now}
	for i := range g.shards {
		g.shards[i].tat = make(map[string]time.Duration)
		g.shards[i].sweepAt = localMinSweep
	}
	return g
}

func (g *localGCRA) shard(key string) *localShard {
	return &g.shards[maphash.String(g.seed, key)%localShards]
}

// allowN is redis_rate's AllowN: all n events or none.
func (g *localGCRA) allowN(key string, l Limit, n int) outcome {
	emission := l.Period / time.Duration(l.Rate)
	burstOffset := emission * time.Duration(l.Burst)
	s := g.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := g.now()
	tat := max(s.tat[key], now)
	newTAT := tat + emission*time.Duration(n)
	diff := now - (newTAT - burstOffset)
	if diff < 0 {
		return outcome{retryAfter: -diff, resetAfter: tat - now}
	}
	s.store(key, newTAT, now)
	return outcome{allowed: n, remaining: int(diff / emission), resetAfter: newTAT - now}
}

// allowAtMost is redis_rate's AllowAtMost: as many of n events as the limit
// allows now, at least one or none. Unlike the Lua script it charges only the
// whole events it grants (see Limiter.Take).
func (g *localGCRA) allowAtMost(key string, l Limit, n int) outcome {
	emission := l.Period / time.Duration(l.Rate)
	burstOffset := emission * time.Duration(l.Burst)
	s := g.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := g.now()
	tat := max(s.tat[key], now)
	diff := now - (tat - burstOffset)
	avail := int(diff / emission)
	if avail < 1 {
		return outcome{retryAfter: emission - diff, resetAfter: tat - now}
	}
	granted := min(n, avail)
	newTAT := tat + emission*time.Duration(granted)
	s.store(key, newTAT, now)
	return outcome{allowed: granted, remaining: avail - granted, resetAfter: newTAT - now}
}

// store records key's TAT, sweeping the shard when it has grown. The caller
// holds s.mu.
func (s *localShard) store(key string, tat, now time.Duration) {
	if _, ok := s.tat[key]; !ok && len(s.tat) >= s.sweepAt {
		for k, t := range s.tat {
			if t <= now {
				delete(s.tat, k)
			}
		}
		const perShard = localMaxKeys / localShards
		if len(s.tat) >= perShard {
			// Drop a quarter at once so that the next sweep is a quarter
			// of a shard of inserts away.
			for k := range s.tat {
				if len(s.tat) <= perShard*3/4 {
					break
				}
				delete(s.tat, k)
			}
		}
		s.sweepAt = min(max(localMinSweep, 2*len(s.tat)), perShard)
	}
	s.tat[key] = tat
}

// len is the number of keys held, for tests.
func (g *localGCRA) len() int {
	n := 0
	for i := range g.shards {
		s := &g.shards[i]
		s.mu.Lock()
		n += len(s.tat)
		s.mu.Unlock()
	}
	return n
}
