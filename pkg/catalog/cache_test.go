package catalog_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/catalog"
	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/ttlcache"
)

// The cache the gateway and the dispatchers read: a company's reads never
// see another company's records, the dispatchers' reads by id do, "not
// found" is cached until an invalidation drops it, and a company change
// drops what the company's records showed.
func TestCacheScopesCachesAndInvalidates(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	c := catalog.NewCache(s, ttlcache.Config{TTL: time.Hour}, nil)
	acme, err := s.CreateCompany(ctx, catalog.NewCompany{Slug: "acme", Name: "Acme", SubscriptionActive: true, Provisioned: true})
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.CreateCompany(ctx, catalog.NewCompany{Slug: "other", Name: "Other"})
	if err != nil {
		t.Fatal(err)
	}
	acct, err := s.CreateMessagingAccount(ctx, catalog.NewMessagingAccount{CompanyID: acme.ID, Name: "Main",
		PhoneNumberID: "2000001", AccessToken: "tok-cached", Connected: true})
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := s.CreateTemplate(ctx, catalog.NewTemplate{CompanyID: acme.ID, Template: whatsapp.Template{Name: "hello"}})
	if err != nil {
		t.Fatal(err)
	}

	if got, err := c.Template(ctx, acme.ID, tpl.ID); err != nil || got.ID != tpl.ID {
		t.Fatalf("acme's template = %+v, %v", got, err)
	}
	if _, err := c.Template(ctx, other.ID, tpl.ID); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("another company's template: %v, want ErrNotFound", err)
	}
	if _, err := c.MessagingAccount(ctx, other.ID, acct.ID); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("another company's account: %v, want ErrNotFound", err)
	}
	if got, err := c.MessagingAccountByID(ctx, acct.ID); err != nil || !got.Connected {
		t.Fatalf("account by id = %+v, %v", got, err)
	}
	if tok, err := c.AccessToken(ctx, acct.ID); err != nil || tok != "tok-cached" {
		t.Fatalf("token = %q, %v", tok, err)
	}

	// An unknown connector name is cached as not found: created afterwards,
	// it shows only once its creation is broadcast.
	if _, err := c.Connector(ctx, acme.ID, "crm"); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("unknown connector: %v", err)
	}
	conn, err := s.CreateConnector(ctx, catalog.NewConnector{CompanyID: acme.ID, Name: "crm", Connected: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Connector(ctx, acme.ID, "crm"); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("before the broadcast: %v, want the cached ErrNotFound", err)
	}
	c.Invalidate(bus.Invalidation{Kind: bus.KindConnector, ID: strconv.FormatInt(conn.ID, 10)})
	if got, err := c.Connector(ctx, acme.ID, "crm"); err != nil || got.ID != conn.ID {
		t.Fatalf("after the broadcast: %+v, %v", got, err)
	}

	// A disconnected account shows after its company's change is broadcast.
	disconnected := false
	if _, err := s.UpdateMessagingAccount(ctx, acct.ID, catalog.AccountUpdate{Connected: &disconnected}); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.MessagingAccount(ctx, acme.ID, acct.ID); !got.Connected {
		t.Fatal("the cached account changed before any broadcast: the test proves nothing")
	}
	c.Invalidate(bus.Invalidation{Kind: bus.KindCompany, ID: strconv.FormatInt(acme.ID, 10)})
	if got, err := c.MessagingAccount(ctx, acme.ID, acct.ID); err != nil || got.Connected {
		t.Fatalf("after the company's broadcast: %+v, %v; want it disconnected", got, err)
	}
}
