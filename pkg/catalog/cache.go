package catalog

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/ttlcache"
)

// Reader is what a Cache reads through: the Store's reads of the records a
// send names.
type Reader interface {
	Campaign(ctx context.Context, companyID, id int64) (Campaign, error)
	Automation(ctx context.Context, companyID, id int64) (Automation, error)
	Template(ctx context.Context, id int64) (Template, error)
	MessagingAccount(ctx context.Context, id int64) (MessagingAccount, error)
	AccessToken(ctx context.Context, accountID int64) (string, error)
	Connector(ctx context.Context, companyID int64, name string) (Connector, error)
}

// Cache is the cached view of the catalog records that every request or
// send reads: the gateway's campaigns, automations, templates, messaging
// accounts and connectors (scoped by company), the dispatchers' accounts,
// templates and access tokens (by id). Each is read through pkg/ttlcache
// (a short TTL, one load per key at a time, a stale entry served while the
// database cannot be read), "not found" is cached too so that an unknown id
// costs no query per request, and Invalidate drops a record at once when a
// change is broadcast (templates, accounts and tokens have no broadcast: the
// TTL bounds them).
type Cache struct {
	campaigns   *ttlcache.Cache[scoped, result[Campaign]]
	automations *ttlcache.Cache[scoped, result[Automation]]
	templates   *ttlcache.Cache[int64, result[Template]]
	accounts    *ttlcache.Cache[int64, result[MessagingAccount]]
	tokens      *ttlcache.Cache[int64, result[string]]
	connectors  *ttlcache.Cache[named, result[Connector]]
}

type scoped struct{ companyID, id int64 }

type named struct {
	companyID int64
	name      string
}

type result[V any] struct {
	found bool
	value V
}

// NewCache returns a cache that reads through r; now is its clock.
func NewCache(r Reader, cfg ttlcache.Config, now func() time.Time) *Cache {
	return &Cache{
		campaigns: ttlcache.New(cfg, now, func(ctx context.Context, k scoped) (result[Campaign], error) {
			return wrap(r.Campaign(ctx, k.companyID, k.id))
		}),
		automations: ttlcache.New(cfg, now, func(ctx context.Context, k scoped) (result[Automation], error) {
			return wrap(r.Automation(ctx, k.companyID, k.id))
		}),
		templates: ttlcache.New(cfg, now, func(ctx context.Context, id int64) (result[Template], error) {
			return wrap(r.Template(ctx, id))
		}),
		accounts: ttlcache.New(cfg, now, func(ctx context.Context, id int64) (result[MessagingAccount], error) {
			return wrap(r.MessagingAccount(ctx, id))
		}),
		tokens: ttlcache.New(cfg, now, func(ctx context.Context, accountID int64) (result[string], error) {
			return wrap(r.AccessToken(ctx, accountID))
		}),
		connectors: ttlcache.New(cfg, now, func(ctx context.Context, k named) (result[Connector], error) {
			return wrap(r.Connector(ctx, k.companyID, k.name))
		}),
	}
}

// wrap caches "not found" as a value.
func wrap[V any](v V, err error) (result[V], error) {
	if errors.Is(err, ErrNotFound) {
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

// owned turns another company's record into ErrNotFound.
func owned[V any](v V, owner, companyID int64, err error) (V, error) {
	if err == nil && owner != companyID {
		var zero V
		return zero, ErrNotFound
	}
	return v, err
}

// Campaign returns the company's campaign or ErrNotFound.
func (c *Cache) Campaign(ctx context.Context, companyID, id int64) (Campaign, error) {
	return get(ctx, c.campaigns, scoped{companyID, id})
}

// Automation returns the company's automation, whatever its state, or ErrNotFound.
func (c *Cache) Automation(ctx context.Context, companyID, id int64) (Automation, error) {
	return get(ctx, c.automations, scoped{companyID, id})
}

// Template returns the company's template or ErrNotFound.
func (c *Cache) Template(ctx context.Context, companyID, id int64) (Template, error) {
	t, err := c.TemplateByID(ctx, id)
	return owned(t, t.CompanyID, companyID, err)
}

// MessagingAccount returns the company's messaging account, connected or
// not, or ErrNotFound.
func (c *Cache) MessagingAccount(ctx context.Context, companyID, id int64) (MessagingAccount, error) {
	a, err := c.MessagingAccountByID(ctx, id)
	return owned(a, a.CompanyID, companyID, err)
}

// Connector returns the company's connector by name, connected or not, or
// ErrNotFound.
func (c *Cache) Connector(ctx context.Context, companyID int64, name string) (Connector, error) {
	return get(ctx, c.connectors, named{companyID, name})
}

// TemplateByID returns a template whatever its company, for a process that
// already holds the company's own reference to it (a dispatcher sending a
// recorded message).
func (c *Cache) TemplateByID(ctx context.Context, id int64) (Template, error) {
	return get(ctx, c.templates, id)
}

// MessagingAccountByID returns an account whatever its company, as
// TemplateByID.
func (c *Cache) MessagingAccountByID(ctx context.Context, id int64) (MessagingAccount, error) {
	return get(ctx, c.accounts, id)
}

// AccessToken returns the account's opened access token.
func (c *Cache) AccessToken(ctx context.Context, accountID int64) (string, error) {
	return get(ctx, c.tokens, accountID)
}

// Invalidate drops a changed record. A company change drops all its records
// (an account disconnect shows through its automations).
func (c *Cache) Invalidate(inv bus.Invalidation) {
	id, err := strconv.ParseInt(inv.ID, 10, 64)
	if err != nil {
		return
	}
	switch inv.Kind {
	case bus.KindCampaign:
		c.campaigns.DeleteFunc(func(k scoped, _ result[Campaign]) bool { return k.id == id })
	case bus.KindAutomation:
		c.automations.DeleteFunc(func(k scoped, _ result[Automation]) bool { return k.id == id })
	case bus.KindConnector:
		// Cached by name, announced by id: an unknown name (not found) may
		// have just been created, so those go too.
		c.connectors.DeleteFunc(func(_ named, r result[Connector]) bool { return !r.found || r.value.ID == id })
	case bus.KindCompany:
		c.campaigns.DeleteFunc(func(k scoped, _ result[Campaign]) bool { return k.companyID == id })
		c.automations.DeleteFunc(func(k scoped, _ result[Automation]) bool { return k.companyID == id })
		c.templates.DeleteFunc(func(_ int64, r result[Template]) bool { return r.found && r.value.CompanyID == id })
		c.accounts.DeleteFunc(func(_ int64, r result[MessagingAccount]) bool { return r.found && r.value.CompanyID == id })
		c.connectors.DeleteFunc(func(k named, _ result[Connector]) bool { return k.companyID == id })
	}
}
