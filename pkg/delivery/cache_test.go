package delivery

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/catalog"
)

// flakyCatalog serves accounts, counting loads, and fails while down.
type flakyCatalog struct {
	Catalog
	loads atomic.Int32
	down  atomic.Bool
	gate  chan struct{}
}

func (c *flakyCatalog) MessagingAccount(ctx context.Context, id int64) (catalog.MessagingAccount, error) {
	c.loads.Add(1)
	if c.gate != nil {
		<-c.gate
	}
	if c.down.Load() {
		return catalog.MessagingAccount{}, errors.New("catalog down")
	}
	return catalog.MessagingAccount{ID: id, Connected: true}, nil
}

// The dispatchers' catalog cache is catalog.Cache: an expired account still
// serves while the catalog cannot be read, and a key is loaded once however
// many sends miss it at the same time.
func TestCatalogCacheServesStaleAndSharesLoads(t *testing.T) {
	ctx := context.Background()
	cat := &flakyCatalog{}
	c := newCatalogCache(cat, time.Nanosecond) // every entry is expired at once
	if a, err := c.account(ctx, 7); err != nil || a.ID != 7 {
		t.Fatalf("account = %+v, %v", a, err)
	}
	cat.down.Store(true)
	if a, err := c.account(ctx, 7); err != nil || a.ID != 7 {
		t.Fatalf("with the catalog down, account = %+v, %v; want the stale entry", a, err)
	}
	if _, err := c.account(ctx, 8); err == nil {
		t.Fatal("an account never loaded served while the catalog is down")
	}

	cat = &flakyCatalog{gate: make(chan struct{})}
	c = newCatalogCache(cat, time.Hour)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.account(ctx, 9); err != nil {
				t.Error(err)
			}
		}()
	}
	for cat.loads.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // let the others join the load in flight
	close(cat.gate)
	wg.Wait()
	if n := cat.loads.Load(); n != 1 {
		t.Fatalf("%d loads of one account, want 1", n)
	}
}
