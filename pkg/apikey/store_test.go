package apikey_test

import (
	"context"
	"errors"
	mathrand "math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/pkg/apikey"
	"github.com/parleyhq/parley/testkit/storetest"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	_, pool := storetest.NewDatabase(t)
	var companyID int64
	if err := pool.QueryRow(ctx, `INSERT INTO companies (slug, name) VALUES ('acme', 'Acme') RETURNING id`).Scan(&companyID); err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	s := apikey.NewStore(pool, clock.now)
	ops := apikey.Actor{Label: "parleyctl"}

	if _, _, _, err := s.Rotate(ctx, companyID, ops); !errors.Is(err, apikey.ErrNoActiveKey) {
		t.Fatalf("rotate with no key: %v", err)
	}
	full1, k1, err := s.Create(ctx, companyID, ops)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Create(ctx, companyID, ops); !errors.Is(err, apikey.ErrActiveKeyExists) {
		t.Fatalf("second create: %v", err)
	}
	p1, err := apikey.Parse(full1)
	if err != nil || p1.KeyID != k1.KeyID || !apikey.SecretMatches(p1.Secret, k1.SecretHash) {
		t.Fatalf("created key does not parse back to its row: %v", err)
	}

	_, k2, prev, err := s.Rotate(ctx, companyID, ops)
	if err != nil {
		t.Fatal(err)
	}
	if prev.KeyID != k1.KeyID || prev.State != apikey.StateRotated || k2.State != apikey.StateActive {
		t.Fatalf("rotate: prev=%+v new=%+v", prev, k2)
	}
	if want := clock.t.Add(24 * time.Hour); !prev.GraceEndsAt.Equal(want) {
		t.Fatalf("grace ends %v, want %v", prev.GraceEndsAt, want)
	}
	old, err := s.Lookup(ctx, k1.KeyID)
	if err != nil {
		t.Fatal(err)
	}
	if !old.Accepts(clock.t.Add(23*time.Hour + 59*time.Minute)) {
		t.Fatal("previous key refused at 23h59m")
	}
	if old.Accepts(clock.t.Add(24*time.Hour + time.Minute)) {
		t.Fatal("previous key accepted at 24h01m")
	}

	clock.advance(time.Hour)
	revoked, err := s.Revoke(ctx, companyID, k2.KeyID, apikey.Actor{Label: "admin@acme.test"})
	if err != nil {
		t.Fatal(err)
	}
	if revoked.Accepts(clock.t) {
		t.Fatal("revoked key still accepted")
	}
	if _, err := s.Revoke(ctx, companyID, k2.KeyID, ops); !errors.Is(err, apikey.ErrAlreadyRevoked) {
		t.Fatalf("second revoke: %v", err)
	}
	if _, err := s.Revoke(ctx, companyID+1, k1.KeyID, ops); !errors.Is(err, apikey.ErrNotFound) {
		t.Fatalf("revoke another company's key: %v", err)
	}
	// After a revoke the company may create a key again.
	if _, _, err := s.Create(ctx, companyID, ops); err != nil {
		t.Fatalf("create after revoke: %v", err)
	}

	events, err := s.Events(ctx, companyID, 10)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range events {
		actions = append(actions, e.Action)
	}
	if got, want := len(actions), 4; got != want {
		t.Fatalf("events = %v, want 4", actions)
	}
	if actions[0] != "create" || actions[1] != "revoke" || actions[2] != "rotate" || actions[3] != "create" {
		t.Fatalf("events newest first = %v", actions)
	}

	used := clock.t.Add(time.Minute)
	if err := s.TouchLastUsed(ctx, map[string]time.Time{k1.KeyID: used}); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Lookup(ctx, k1.KeyID)
	if got.LastUsedAt == nil || !got.LastUsedAt.Equal(used) {
		t.Fatalf("last_used_at = %v, want %v", got.LastUsedAt, used)
	}
}

func TestCreateFromMaterial(t *testing.T) {
	ctx := context.Background()
	_, pool := storetest.NewDatabase(t)
	var acme, globex int64
	if err := pool.QueryRow(ctx, `INSERT INTO companies (slug, name) VALUES ('acme', 'Acme') RETURNING id`).Scan(&acme); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `INSERT INTO companies (slug, name) VALUES ('globex', 'Globex') RETURNING id`).Scan(&globex); err != nil {
		t.Fatal(err)
	}
	s := apikey.NewStore(pool, nil)
	ops := apikey.Actor{Label: "parleyctl"}
	material := func() *mathrand.ChaCha8 { return mathrand.NewChaCha8([32]byte{7}) }

	want, _, err := apikey.GenerateFrom(material())
	if err != nil {
		t.Fatal(err)
	}
	full, k, err := s.CreateFrom(ctx, acme, material(), ops)
	if err != nil {
		t.Fatal(err)
	}
	if full != want {
		t.Fatalf("stored key %q, GenerateFrom gave %q", full, want)
	}
	p, _ := apikey.Parse(full)
	if k.State != apikey.StateActive || k.KeyID != p.KeyID || !apikey.SecretMatches(p.Secret, k.SecretHash) {
		t.Fatalf("row %+v does not match key %q", k, full)
	}
	if _, _, err := s.CreateFrom(ctx, acme, mathrand.NewChaCha8([32]byte{8}), ops); !errors.Is(err, apikey.ErrActiveKeyExists) {
		t.Fatalf("second create for the same company: %v", err)
	}
	// The key id is unique across companies: the same material cannot make a second key.
	if _, _, err := s.CreateFrom(ctx, globex, material(), ops); err == nil {
		t.Fatal("same material made a second key for another company")
	}
	events, err := s.Events(ctx, acme, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Action != "create" || events[0].KeyID != k.KeyID {
		t.Fatalf("events = %+v, want one create of %s", events, k.KeyID)
	}
}

// Gateways flush last_used_at for overlapping sets of keys at the same
// time; each flush must lock the rows in one order, or PostgreSQL breaks
// the cycle by failing one of them (make bench-revoke showed it with three
// gateways and a thousand keys).
func TestTouchLastUsedConcurrently(t *testing.T) {
	ctx := context.Background()
	_, pool := storetest.NewDatabase(t)
	s := apikey.NewStore(pool, nil)
	const keys, writers, rounds = 400, 4, 5
	if _, err := pool.Exec(ctx, `INSERT INTO companies (slug, name) SELECT 'c' || i, 'c' || i FROM generate_series(1, $1) i`, keys); err != nil {
		t.Fatal(err)
	}
	var ids []string
	rows, err := pool.Query(ctx, `SELECT id FROM companies ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	companies, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range companies {
		if _, k, err := s.Create(ctx, c, apikey.Actor{Label: "test"}); err != nil {
			t.Fatal(err)
		} else {
			ids = append(ids, k.KeyID)
		}
	}
	at := time.Now().UTC().Truncate(time.Microsecond)
	errs := make(chan error, writers*rounds)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				used := make(map[string]time.Time, len(ids))
				for _, id := range ids {
					used[id] = at.Add(time.Duration(w*rounds+r) * time.Second)
				}
				errs <- s.TouchLastUsed(ctx, used)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent flush: %v", err)
		}
	}
	var latest time.Time
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*), min(last_used_at) FROM api_keys WHERE last_used_at = (SELECT max(last_used_at) FROM api_keys)`).Scan(&n, &latest); err != nil {
		t.Fatal(err)
	}
	if want := at.Add(time.Duration(writers*rounds-1) * time.Second); n != keys || !latest.Equal(want) {
		t.Fatalf("%d keys at the latest use %s; want all %d at %s (the newest write wins)", n, latest, keys, want)
	}
}
