// Package lookup is the gateway's cached view of the catalog records a send
// names: campaigns and automations, read through a short TTL and dropped at
// once when a change is broadcast.
package lookup

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/services/gateway/internal/ttlcache"
)

// ErrNotFound is a record that does not exist for the caller's company.
var ErrNotFound = catalog.ErrNotFound

type scoped struct{ companyID, id int64 }

type result[V any] struct {
	found bool
	value V
}

// Catalog reads campaigns and automations for the send endpoints.
type Catalog struct {
	campaigns   *ttlcache.Cache[scoped, result[catalog.Campaign]]
	automations *ttlcache.Cache[scoped, result[catalog.Automation]]
}

// New returns a cached catalog over store.
func New(store *catalog.Store, cfg ttlcache.Config, now func() time.Time) *Catalog {
	return &Catalog{
		campaigns: ttlcache.New(cfg, now, func(ctx context.Context, k scoped) (result[catalog.Campaign], error) {
			return wrap(store.Campaign(ctx, k.companyID, k.id))
		}),
		automations: ttlcache.New(cfg, now, func(ctx context.Context, k scoped) (result[catalog.Automation], error) {
			return wrap(store.Automation(ctx, k.companyID, k.id))
		}),
	}
}

// wrap caches "not found" as a value so that unknown ids are not looked up
// on every request.
func wrap[V any](v V, err error) (result[V], error) {
	if errors.Is(err, catalog.ErrNotFound) {
		return result[V]{}, nil
	}
	if err != nil {
		return result[V]{}, err
	}
	return result[V]{found: true, value: v}, nil
}

func get[V any](ctx context.Context, c *ttlcache.Cache[scoped, result[V]], companyID, id int64) (V, error) {
	var zero V
	e, _, err := c.Get(ctx, scoped{companyID, id})
	if err != nil {
		return zero, err
	}
	if !e.Value.found {
		return zero, ErrNotFound
	}
	return e.Value.value, nil
}

// Campaign returns the company's campaign or ErrNotFound.
func (c *Catalog) Campaign(ctx context.Context, companyID, id int64) (catalog.Campaign, error) {
	return get(ctx, c.campaigns, companyID, id)
}

// Automation returns the company's automation, whatever its state, or ErrNotFound.
func (c *Catalog) Automation(ctx context.Context, companyID, id int64) (catalog.Automation, error) {
	return get(ctx, c.automations, companyID, id)
}

// Invalidate drops a changed record. A company change drops all its records
// (an account disconnect shows through its automations).
func (c *Catalog) Invalidate(inv bus.Invalidation) {
	id, err := strconv.ParseInt(inv.ID, 10, 64)
	if err != nil {
		return
	}
	switch inv.Kind {
	case bus.KindCampaign:
		c.campaigns.DeleteFunc(func(k scoped, _ result[catalog.Campaign]) bool { return k.id == id })
	case bus.KindAutomation:
		c.automations.DeleteFunc(func(k scoped, _ result[catalog.Automation]) bool { return k.id == id })
	case bus.KindCompany:
		c.campaigns.DeleteFunc(func(k scoped, _ result[catalog.Campaign]) bool { return k.companyID == id })
		c.automations.DeleteFunc(func(k scoped, _ result[catalog.Automation]) bool { return k.companyID == id })
	}
}
