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
// token) for a short while, so that a send costs no query: catalog.Cache,
// the gateway's cache too. Entries expire on the process's monotonic clock,
// not on the injectable business clock. Time zones are loaded once here.
type catalogCache struct {
	cat *catalog.Cache

	mu    sync.Mutex
	zones map[string]*time.Location
}

func newCatalogCache(cat Catalog, ttl time.Duration) *catalogCache {
	cfg := ttlcache.Config{TTL: ttl, StaleIfError: catalogStaleIfError}
	return &catalogCache{cat: catalog.NewCache(sendReads{cat}, cfg, time.Now), zones: map[string]*time.Location{}}
}

// sendReads is the dispatchers' Catalog as the cache reads it: they never
// look a connector up by name.
type sendReads struct{ Catalog }

func (sendReads) Connector(context.Context, int64, string) (catalog.Connector, error) {
	return catalog.Connector{}, catalog.ErrNotFound
}

func (c *catalogCache) account(ctx context.Context, id int64) (catalog.MessagingAccount, error) {
	return c.cat.MessagingAccountByID(ctx, id)
}

func (c *catalogCache) template(ctx context.Context, id int64) (catalog.Template, error) {
	return c.cat.TemplateByID(ctx, id)
}

func (c *catalogCache) token(ctx context.Context, accountID int64) (string, error) {
	return c.cat.AccessToken(ctx, accountID)
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
