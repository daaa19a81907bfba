package auth_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/apikey"
	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/ttlcache"
	"github.com/parleyhq/parley/services/gateway/internal/auth"
	"github.com/parleyhq/parley/testkit/storetest"
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

func TestAuthenticate(t *testing.T) {
	ctx := context.Background()
	_, pool := storetest.NewDatabase(t)
	clk := &clock{t: time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)}
	var company int64
	if err := pool.QueryRow(ctx, `INSERT INTO companies (slug, name, subscription_active, provisioned) VALUES ('acme','Acme',true,true) RETURNING id`).Scan(&company); err != nil {
		t.Fatal(err)
	}
	keys := apikey.NewStore(pool, clk.now)
	op := apikey.Actor{Label: "test"}
	full, created, err := keys.Create(ctx, company, op)
	if err != nil {
		t.Fatal(err)
	}
	a := auth.New(pool, auth.Config{Cache: ttlcache.Config{TTL: time.Hour}, TouchEvery: time.Minute, FlushEvery: time.Hour}, clk.now, zap.NewNop())

	p, err := a.Authenticate(ctx, full)
	if err != nil || p.CompanyID != company || p.KeyID != created.KeyID {
		t.Fatalf("valid key: %+v, %v", p, err)
	}
	// One character of the secret changed: to another character, since a
	// fixed replacement is the same key when it is already that character.
	i, c := len(full)-7, byte('A')
	if full[i] == c {
		c = 'B'
	}
	for name, header := range map[string]string{
		"absent":     "",
		"malformed":  "service_nope",
		"bad secret": full[:i] + string(c) + full[i+1:],
	} {
		if _, err := a.Authenticate(ctx, header); !errors.Is(err, auth.ErrInvalidKey) {
			t.Errorf("%s: %v, want ErrInvalidKey", name, err)
		}
	}
	unknown, _, _ := apikey.Generate()
	if _, err := a.Authenticate(ctx, unknown); !errors.Is(err, auth.ErrInvalidKey) {
		t.Errorf("unknown key: %v", err)
	}

	// Rotation: the previous key works for exactly 24 hours.
	full2, _, prev, err := keys.Rotate(ctx, company, op)
	if err != nil {
		t.Fatal(err)
	}
	a.Invalidate(bus.Invalidation{Kind: bus.KindAPIKey, ID: prev.KeyID})
	clk.add(23*time.Hour + 59*time.Minute)
	if _, err := a.Authenticate(ctx, full); err != nil {
		t.Fatalf("previous key at 23h59m: %v", err)
	}
	if _, err := a.Authenticate(ctx, full2); err != nil {
		t.Fatalf("new key: %v", err)
	}
	clk.add(2 * time.Minute)
	if _, err := a.Authenticate(ctx, full); !errors.Is(err, auth.ErrInvalidKey) {
		t.Fatalf("previous key at 24h01m: %v", err)
	}

	// Subscription and provisioning, seen after a company broadcast.
	if _, err := pool.Exec(ctx, `UPDATE companies SET subscription_active = false WHERE id = $1`, company); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(ctx, full2); err != nil {
		t.Fatalf("cached entry should still serve before the broadcast: %v", err)
	}
	a.Invalidate(bus.Invalidation{Kind: bus.KindCompany, ID: strconv.FormatInt(company, 10)})
	if _, err := a.Authenticate(ctx, full2); !errors.Is(err, auth.ErrSubscriptionRequired) {
		t.Fatalf("no subscription: %v", err)
	}
	if _, err := pool.Exec(ctx, `UPDATE companies SET subscription_active = true, provisioned = false WHERE id = $1`, company); err != nil {
		t.Fatal(err)
	}
	a.Invalidate(bus.Invalidation{Kind: bus.KindCompany, ID: strconv.FormatInt(company, 10)})
	if _, err := a.Authenticate(ctx, full2); !errors.Is(err, auth.ErrNotProvisioned) {
		t.Fatalf("not provisioned: %v", err)
	}
	if _, err := pool.Exec(ctx, `UPDATE companies SET provisioned = true WHERE id = $1`, company); err != nil {
		t.Fatal(err)
	}
	a.Invalidate(bus.Invalidation{Kind: bus.KindCompany, ID: strconv.FormatInt(company, 10)})
	if _, err := a.Authenticate(ctx, full2); err != nil {
		t.Fatalf("provisioned again: %v", err)
	}

	// Revocation takes effect on the broadcast, not at the TTL (an hour here).
	k2, _ := apikey.Parse(full2)
	if _, err := keys.Revoke(ctx, company, k2.KeyID, op); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(ctx, full2); err != nil {
		t.Fatalf("before the broadcast the cached entry still serves: %v", err)
	}
	a.Invalidate(bus.Invalidation{Kind: bus.KindAPIKey, ID: k2.KeyID})
	if _, err := a.Authenticate(ctx, full2); !errors.Is(err, auth.ErrInvalidKey) {
		t.Fatalf("revoked key after broadcast: %v", err)
	}
}

func TestLastUsedIsWrittenInTheBackgroundAtMostOncePerMinute(t *testing.T) {
	ctx := context.Background()
	_, pool := storetest.NewDatabase(t)
	clk := &clock{t: time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)}
	var company int64
	if err := pool.QueryRow(ctx, `INSERT INTO companies (slug, name, subscription_active, provisioned) VALUES ('acme','Acme',true,true) RETURNING id`).Scan(&company); err != nil {
		t.Fatal(err)
	}
	full, k, err := apikey.NewStore(pool, clk.now).Create(ctx, company, apikey.Actor{Label: "test"})
	if err != nil {
		t.Fatal(err)
	}
	a := auth.New(pool, auth.Config{Cache: ttlcache.Config{TTL: time.Hour}, TouchEvery: time.Minute, FlushEvery: 20 * time.Millisecond}, clk.now, zap.NewNop())
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { a.RunTouches(runCtx); close(done) }()
	defer func() { stop(); <-done }()

	lastUsed := func() *time.Time {
		var at *time.Time
		if err := pool.QueryRow(ctx, `SELECT last_used_at FROM api_keys WHERE key_id = $1`, k.KeyID).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	waitFor := func(want time.Time) {
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if at := lastUsed(); at != nil && at.Equal(want) {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("last_used_at = %v, want %v", lastUsed(), want)
	}
	first := clk.now()
	if _, err := a.Authenticate(ctx, full); err != nil {
		t.Fatal(err)
	}
	waitFor(first)
	clk.add(30 * time.Second)
	if _, err := a.Authenticate(ctx, full); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if at := lastUsed(); !at.Equal(first) {
		t.Fatalf("last_used_at written again within a minute: %v", at)
	}
	clk.add(31 * time.Second)
	if _, err := a.Authenticate(ctx, full); err != nil {
		t.Fatal(err)
	}
	waitFor(clk.now())
}
