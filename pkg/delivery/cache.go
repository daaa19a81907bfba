package delivery

import (
	"context"
	"sync"
	"time"

	"github.com/parleyhq/parley/pkg/catalog"
)

// catalogCache keeps what every send reads (the account, its template, its
// token) for a short while, so that a send costs no query. Entries expire on
// the process's monotonic clock, not on the injectable business clock.
type catalogCache struct {
	cat Catalog
	ttl time.Duration

	mu        sync.Mutex
	accounts  map[int64]cached[catalog.MessagingAccount]
	templates map[int64]cached[catalog.Template]
	tokens    map[int64]cached[string]
	zones     map[string]*time.Location
}

type cached[T any] struct {
	v       T
	expires time.Time
}

func newCatalogCache(cat Catalog, ttl time.Duration) *catalogCache {
	return &catalogCache{
		cat: cat, ttl: ttl,
		accounts:  map[int64]cached[catalog.MessagingAccount]{},
		templates: map[int64]cached[catalog.Template]{},
		tokens:    map[int64]cached[string]{},
		zones:     map[string]*time.Location{},
	}
}

func lookup[T any](c *catalogCache, m map[int64]cached[T], id int64, load func() (T, error)) (T, error) {
	c.mu.Lock()
	e, ok := m[id]
	c.mu.Unlock()
	if ok && time.Now().Before(e.expires) {
		return e.v, nil
	}
	v, err := load()
	if err != nil {
		var zero T
		return zero, err
	}
	c.mu.Lock()
	m[id] = cached[T]{v: v, expires: time.Now().Add(c.ttl)}
	c.mu.Unlock()
	return v, nil
}

func (c *catalogCache) account(ctx context.Context, id int64) (catalog.MessagingAccount, error) {
	return lookup(c, c.accounts, id, func() (catalog.MessagingAccount, error) { return c.cat.MessagingAccount(ctx, id) })
}

func (c *catalogCache) template(ctx context.Context, id int64) (catalog.Template, error) {
	return lookup(c, c.templates, id, func() (catalog.Template, error) { return c.cat.Template(ctx, id) })
}

func (c *catalogCache) token(ctx context.Context, accountID int64) (string, error) {
	return lookup(c, c.tokens, accountID, func() (string, error) { return c.cat.AccessToken(ctx, accountID) })
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
