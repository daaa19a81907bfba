package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/pkg/store"
	"github.com/parleyhq/parley/testkit/storetest"
)

func TestMigrateEmptyThenAgainIsNoop(t *testing.T) {
	ctx := context.Background()
	url := storetest.NewEmptyDatabase(t)

	first, err := store.Migrate(ctx, url)
	if err != nil {
		t.Fatalf("first migrate: %v", err)
	}
	want, err := store.LatestVersion()
	if err != nil {
		t.Fatal(err)
	}
	if first.From != 0 || first.To != want || len(first.Applied) == 0 {
		t.Fatalf("first migrate = %+v, want 0 -> %d", first, want)
	}
	second, err := store.Migrate(ctx, url)
	if err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	if len(second.Applied) != 0 || second.From != want || second.To != want {
		t.Fatalf("second migrate = %+v, want no-op at %d", second, want)
	}
	pool, err := store.Open(ctx, store.Config{URL: url, MaxConns: 2})
	if err != nil {
		t.Fatalf("open migrated: %v", err)
	}
	pool.Close()
}

func TestOpenRefusesOlderSchema(t *testing.T) {
	ctx := context.Background()
	t.Run("never migrated", func(t *testing.T) {
		url := storetest.NewEmptyDatabase(t)
		_, err := store.Open(ctx, store.Config{URL: url, MaxConns: 2})
		if !errors.Is(err, store.ErrSchemaOutdated) {
			t.Fatalf("Open on empty database: err = %v, want ErrSchemaOutdated", err)
		}
	})
	t.Run("behind", func(t *testing.T) {
		url, pool := storetest.NewDatabase(t)
		// Pretend the newest migration was never applied.
		if _, err := pool.Exec(ctx, `DELETE FROM goose_db_version WHERE version_id = (SELECT max(version_id) FROM goose_db_version)`); err != nil {
			t.Fatal(err)
		}
		_, err := store.Open(ctx, store.Config{URL: url, MaxConns: 2})
		if !errors.Is(err, store.ErrSchemaOutdated) {
			t.Fatalf("Open on older schema: err = %v, want ErrSchemaOutdated", err)
		}
	})
}

func TestOneActiveKeyPerCompanyIsEnforcedByTheDatabase(t *testing.T) {
	ctx := context.Background()
	_, pool := storetest.NewDatabase(t)
	var companyID int64
	if err := pool.QueryRow(ctx, `INSERT INTO companies (slug, name) VALUES ('acme', 'Acme') RETURNING id`).Scan(&companyID); err != nil {
		t.Fatal(err)
	}
	insert := func(p *pgxpool.Pool, keyID string) error {
		_, err := p.Exec(ctx, `INSERT INTO api_keys (company_id, key_id, secret_hash, secret_hint) VALUES ($1, $2, $3, 'abcd')`,
			companyID, keyID, make([]byte, 32))
		return err
	}
	if err := insert(pool, "k1"); err != nil {
		t.Fatalf("first active key: %v", err)
	}
	if err := insert(pool, "k2"); err == nil {
		t.Fatal("second active key for the same company was accepted")
	}
}
