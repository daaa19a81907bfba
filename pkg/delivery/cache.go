package delivery

import (
	"context"
	"sync"
	"time"

	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/ttlcache"
)

// catalogStaleIfError is how long past its TTL a catalog entry may still
// serve sends while the catalog cannot be read.
const catalogStaleIfError = time.Minute

// catalogCache keeps what every send reads (the account, its template, its
// token) for a short while, so that a send costs no query: the gateway's
// cache (pkg/ttlcache: bounded, one load per key at a time, stale entries
// served while loading fails). Entries expire on the process's monotonic
// clock, not on the injectable business clock.
type catalogCache struct {
	accounts  *ttlcache.Cache[int64, catalog.MessagingAccount]
	templates *ttlcache.Cache[int64, catalog.Template]
	tokens    *ttlcache.Cache[int64, string]

	mu    sync.Mutex
	zones map[string]*time.Location
}

func newCatalogCache(cat Catalog, ttl time.Duration) *catalogCache {
	cfg := ttlcache.Config{TTL: ttl, StaleIfError: catalogStaleIfError}
	return &catalogCache{
		accounts:  ttlcache.New(cfg, time.Now, cat.MessagingAccount),
		templates: ttlcache.New(cfg, time.Now, cat.Template),
		tokens:    ttlcache.New(cfg, time.Now, cat.AccessToken),
		zones:     map[string]*time.Location{},
	}
}

func lookup[V any](ctx context.Context, c *ttlcache.Cache[int64, V], id int64) (V, error) {
	e, _, err := c.Get(ctx, id)
	if err != nil {
		var zero V
		return zero, err
	}
	return e.Value, nil
}

func (c *catalogCache) account(ctx context.Context, id int64) (catalog.MessagingAccount, error) {
	return lookup(ctx, c.accounts, id)
}

func (c *catalogCache) template(ctx context.Context, id int64) (catalog.Template, error) {
	return lookup(ctx, c.templates, id)
}

func (c *catalogCache) token(ctx context.Context, accountID int64) (string, error) {
	return lookup(ctx, c.tokens, accountID)
}

// location loads an IANA zone once; an unknown zone (the catalog refuses
// them, so only a hand-edited row) reads as UTC.
func (c *catalogCache) location(name string) *time.Location {
	c.mu.Lock()
	defer c.mu.Unlock()
	if loc, ok := c.zones[name]; ok {
		return loc
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		loc = time.UTC
	}
	c.zones[name] = loc
	return loc
}
