package ttlcache_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/ttlcache"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestTTLStaleIfErrorAndDelete(t *testing.T) {
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	var loads atomic.Int32
	var failing atomic.Bool
	c := ttlcache.New(ttlcache.Config{TTL: 5 * time.Second, StaleIfError: time.Minute}, clk.now,
		func(_ context.Context, k string) (string, error) {
			loads.Add(1)
			if failing.Load() {
				return "", errors.New("database down")
			}
			return k + "-v", nil
		})
	ctx := context.Background()
	get := func() (string, bool, error) {
		e, stale, err := c.Get(ctx, "a")
		if err != nil {
			return "", false, err
		}
		return e.Value, stale, nil
	}
	if v, _, _ := get(); v != "a-v" || loads.Load() != 1 {
		t.Fatalf("first get: %q after %d loads", v, loads.Load())
	}
	clk.add(4 * time.Second)
	if get(); loads.Load() != 1 {
		t.Fatal("entry reloaded within its TTL")
	}
	clk.add(2 * time.Second)
	if get(); loads.Load() != 2 {
		t.Fatal("entry not reloaded after its TTL")
	}
	failing.Store(true)
	clk.add(30 * time.Second)
	if v, stale, err := get(); err != nil || !stale || v != "a-v" {
		t.Fatalf("while failing within stale window: %q stale=%v err=%v", v, stale, err)
	}
	clk.add(time.Minute)
	if _, _, err := get(); err == nil {
		t.Fatal("served an entry older than TTL+StaleIfError")
	}
	failing.Store(false)
	get()
	c.Delete("a")
	before := loads.Load()
	if get(); loads.Load() != before+1 {
		t.Fatal("Delete did not force a reload")
	}
}

func TestConcurrentMissesShareOneLoad(t *testing.T) {
	var loads atomic.Int32
	release := make(chan struct{})
	c := ttlcache.New(ttlcache.Config{TTL: time.Minute}, nil, func(_ context.Context, k int) (int, error) {
		loads.Add(1)
		<-release
		return k * 2, nil
	})
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, _, err := c.Get(context.Background(), 21)
			if err != nil || e.Value != 42 {
				t.Errorf("got %v, %v", e, err)
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	if n := loads.Load(); n != 1 {
		t.Fatalf("%d loads for 50 concurrent misses, want 1", n)
	}
}

func TestMaxEntriesBoundsMemory(t *testing.T) {
	c := ttlcache.New(ttlcache.Config{TTL: time.Hour, MaxEntries: 100}, nil, func(_ context.Context, k int) (int, error) { return k, nil })
	for i := range 1000 {
		if _, _, err := c.Get(context.Background(), i); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.Len(); n > 100 {
		t.Fatalf("cache holds %d entries, cap is 100", n)
	}
}
