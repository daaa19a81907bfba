// Package lookup is the gateway's cached view of the catalog records a send
// names: campaigns, automations, templates, messaging accounts and
// connectors, read through a short TTL and dropped at once when a change is
// broadcast (templates and accounts have no broadcast: the TTL bounds them).
package lookup

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/ttlcache"
)

// ErrNotFound is a record that does not exist for the caller's company.
var ErrNotFound = catalog.ErrNotFound

type scoped struct{ companyID, id int64 }

type result[V any] struct {
	found bool
	value V
}

type named struct {
	companyID int64
	name      string
}

// Catalog reads what the send endpoints name, scoped by company.
type Catalog struct {
	campaigns   *ttlcache.Cache[scoped, result[catalog.Campaign]]
	automations *ttlcache.Cache[scoped, result[catalog.Automation]]
	templates   *ttlcache.Cache[scoped, result[catalog.Template]]
	accounts    *ttlcache.Cache[scoped, result[catalog.MessagingAccount]]
	connectors  *ttlcache.Cache[named, result[catalog.Connector]]
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
		templates: ttlcache.New(cfg, now, func(ctx context.Context, k scoped) (result[catalog.Template], error) {
			t, err := store.Template(ctx, k.id)
			return wrap(owned(t, t.CompanyID, k.companyID, err))
		}),
		accounts: ttlcache.New(cfg, now, func(ctx context.Context, k scoped) (result[catalog.MessagingAccount], error) {
			a, err := store.MessagingAccount(ctx, k.id)
			return wrap(owned(a, a.CompanyID, k.companyID, err))
		}),
		connectors: ttlcache.New(cfg, now, func(ctx context.Context, k named) (result[catalog.Connector], error) {
			return wrap(store.Connector(ctx, k.companyID, k.name))
		}),
	}
}

// owned turns another company's record into ErrNotFound.
func owned[V any](v V, owner, companyID int64, err error) (V, error) {
	if err == nil && owner != companyID {
		var zero V
		return zero, catalog.ErrNotFound
	}
	return v, err
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

func get[K comparable, V any](ctx context.Context, c *ttlcache.Cache[K, result[V]], k K) (V, error) {
	var zero V
	e, _, err := c.Get(ctx, k)
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
	return get(ctx, c.campaigns, scoped{companyID, id})
}

// Automation returns the company's automation, whatever its state, or ErrNotFound.
func (c *Catalog) Automation(ctx context.Context, companyID, id int64) (catalog.Automation, error) {
	return get(ctx, c.automations, scoped{companyID, id})
}

// Template returns the company's template or ErrNotFound.
func (c *Catalog) Template(ctx context.Context, companyID, id int64) (catalog.Template, error) {
	return get(ctx, c.templates, scoped{companyID, id})
}

// MessagingAccount returns the company's messaging account, connected or
// not, or ErrNotFound.
func (c *Catalog) MessagingAccount(ctx context.Context, companyID, id int64) (catalog.MessagingAccount, error) {
	return get(ctx, c.accounts, scoped{companyID, id})
}

// Connector returns the company's connector by name, connected or not, or
// ErrNotFound.
func (c *Catalog) Connector(ctx context.Context, companyID int64, name string) (catalog.Connector, error) {
	return get(ctx, c.connectors, named{companyID, name})
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
	case bus.KindConnector:
		// Cached by name, announced by id: an unknown name (not found) may
		// have just been created, so those go too.
		c.connectors.DeleteFunc(func(_ named, r result[catalog.Connector]) bool { return !r.found || r.value.ID == id })
	case bus.KindCompany:
		c.campaigns.DeleteFunc(func(k scoped, _ result[catalog.Campaign]) bool { return k.companyID == id })
		c.automations.DeleteFunc(func(k scoped, _ result[catalog.Automation]) bool { return k.companyID == id })
		c.templates.DeleteFunc(func(k scoped, _ result[catalog.Template]) bool { return k.companyID == id })
		c.accounts.DeleteFunc(func(k scoped, _ result[catalog.MessagingAccount]) bool { return k.companyID == id })
		c.connectors.DeleteFunc(func(k named, _ result[catalog.Connector]) bool { return k.companyID == id })
	}
}
